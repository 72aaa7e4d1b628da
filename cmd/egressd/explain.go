package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/internal/termsafe"
	"github.com/egressd/egressd/policy"
)

func runExplain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("explain", "usage: egressd explain --manifest PATH [--config FILE] [--state DIR] HOST[:PORT]\n\nShows the decision for one CONNECT target. It does not resolve DNS.\nWith --state it decides as serve does now: version memory binds each id\nto its manifest's folder, never to a listener.", stderr)
	manifest := fs.String("manifest", "", "the integration's manifest file or folder (required)")
	config := fs.String("config", "", "operator config: its deny rules and this integration's exemptions apply")
	state := fs.String("state", "", "version memory directory (read only): decide as serve does while a widening or id change waits for approval")
	listen := fs.String("listen", "", "accepted for older scripts and ignored: a listener does not bind an id")
	targets, err := parseAnywhere(fs, args)
	if err != nil {
		return exitUsage
	}
	if missing := explainMissing(*manifest, len(targets)); missing != "" {
		fmt.Fprintf(stderr, "egressd explain: %s\n\n", missing)
		fs.Usage()
		return exitUsage
	}
	cfg := policy.DefaultConfig()
	if *config != "" {
		var err error
		if cfg, err = policy.LoadConfig(*config); err != nil {
			printConfigError(stderr, *config, err)
			return exitUsage
		}
	}
	_ = *listen
	p, err := explainPolicy(*manifest, cfg, *state)
	if err != nil {
		// The error names paths the operator typed or the author chose:
		// one line, its line breaks escaped, so a folder's name cannot
		// print a line of its own (round 45); the manifest's problems
		// follow, one a line, as check prints them.
		var problems *manifestProblems
		if errors.As(err, &problems) {
			printLine(stderr, "egressd explain: %s", problems.head)
			printLines(stderr, fmt.Sprint(problems.list))
			return exitUsage
		}
		printLine(stderr, "egressd explain: %s", err.Error())
		return exitUsage
	}
	if *state != "" {
		// A folder without version memory decides as a first load, with no
		// widening waiting: say so, or a mistyped --state reads as "allow"
		// for a host serve refuses (round 45).
		if _, err := os.Lstat(policy.StatePath(*state)); errors.Is(err, os.ErrNotExist) {
			printLine(stderr, "egressd explain: note: %s does not exist: no egressd kept version memory in %s, so this decides as a first load, with no widening waiting; give --state the folder serve or run keeps it in (their state_dir)", policy.StatePath(*state), *state)
		}
	}
	if *state == "" && *config != "" && cfg.StateDir != "" {
		// serve would judge by that version memory: a widening waiting
		// there is refused by serve and shown allowed here.
		printLine(stderr, "egressd explain: note: version memory was not read; the config's serve keeps it in %s: add --state %s to decide as serve does now", cfg.StateDir, termsafe.ShellWord(cfg.StateDir))
	}
	target := targets[0]
	if !strings.Contains(target, ":") || strings.HasSuffix(target, "]") {
		target += ":443"
	}
	d := p.DecideTarget(target)
	printDecision(stdout, d, p, target)
	if change := p.PendingChange(); change != "" {
		id, version := p.InForce()
		printLine(stdout, "in force: the list approved for %s %s; the id change to %s waits for approval: %s", id, version, change, p.ApproveCommand())
	}
	if n := p.PendingNotice(); n != "" {
		printLine(stdout, "pending: %s", n)
	}
	if d.Verdict.Permits() {
		return exitOK
	}
	return exitFail
}

// explainPolicy builds the policy "serve" would apply to manifest under cfg.
// With a state directory it judges by that version memory as serve would
// now, on a copy: explain never writes state.
func explainPolicy(manifest string, cfg policy.Config, state string) (*policy.Policy, error) {
	m, file, ps, err := allowlist.Load(manifest, &cfg.Rules)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, &manifestProblems{head: file + ": the manifest has errors; run egressd check:", list: ps.Errors()}
	}
	in := policy.Integration{Manifest: manifest, Listen: "explain", Exemptions: policy.Exemptions{Mode: cfg.Mode}}
	if c, ok := cfg.EntryFor(file); ok {
		in.Exemptions, in.Widen, in.PinDigest, in.Listen = c.Exemptions, c.Widen, c.PinDigest, c.Listen
	}
	if state == "" {
		return policy.NewPolicy(m, m.Entries, policy.PolicyOptions{Deny: cfg.Deny, NAT64: cfg.NAT64, Exemptions: in.Exemptions}), nil
	}
	mem, err := policy.ReadMemory(state)
	if err != nil {
		return nil, err
	}
	cfg.Integrations = []policy.Integration{in}
	reg := policy.NewRegistry(mem, nil)
	if out := reg.Load(cfg)[0]; out.Result == policy.Failed {
		return nil, fmt.Errorf("%s: serve refuses this manifest: %v", file, out.Err)
	}
	p := reg.Policy(manifest)
	p.StateDir = state // a copy of the memory there: the commands it prints name it
	return p, nil
}

// manifestProblems is explainPolicy's error for a manifest with problems:
// a heading, then the problems one a line.
type manifestProblems struct {
	head string
	list allowlist.Problems
}

func (e *manifestProblems) Error() string { return fmt.Sprintf("%s\n%s", e.head, e.list) }

func printDecision(w io.Writer, d policy.Decision, p *policy.Policy, raw string) {
	target := fmt.Sprintf("%s:%d", d.Host, d.Port)
	if d.Host.IsZero() {
		target = fmt.Sprintf("%q", raw)
	}
	printLine(w, "%s %s %s", d.Verdict, d.Reason, target)
	if d.Rule != "" {
		printLine(w, "rule: %s", d.Rule)
	} else {
		var list []string
		for _, e := range p.Entries() {
			list = append(list, e.String())
		}
		printLine(w, "rule: none matched; the manifest lists: %s", orNone(strings.Join(list, " ")))
	}
	if d.Exemption != "" {
		printLine(w, "exemption: %s", d.Exemption)
	}
	printLine(w, "%s", policy.Sentence(d, p))
}

func orNone(s string) string {
	if s == "" {
		return "(nothing: no egress)"
	}
	return s
}

// explainMissing names what an explain command line lacks, or "".
func explainMissing(manifest string, targets int) string {
	switch {
	case manifest == "":
		return "--manifest PATH is missing: the integration's manifest file or folder, whose list decides"
	case targets == 0:
		return "HOST[:PORT] is missing: the CONNECT target to explain"
	case targets > 1:
		return "give one HOST[:PORT]"
	}
	return ""
}
