package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/internal/termsafe"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy"
	"github.com/egressd/egressd/sandbox"
)

// checkReport is one manifest's result, as --json prints it.
type checkReport struct {
	File     string   `json:"file"`
	Valid    bool     `json:"valid"`
	ID       string   `json:"id,omitempty"`
	Version  string   `json:"version,omitempty"`
	Format   string   `json:"format,omitempty"`
	Entries  []string `json:"entries,omitempty"`
	Digest   string   `json:"digest,omitempty"`
	Errors   []string `json:"errors,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", "usage: egressd check [--json] [--config FILE] PATH...\n\nPATH is a manifest file or the integration folder that holds it.", stderr)
	asJSON := fs.Bool("json", false, "print a JSON array of results")
	config := fs.String("config", "", "also validate this operator config file")
	paths, err := parseFilesAnywhere(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(paths) == 0 && *config == "" {
		fs.Usage()
		return exitUsage
	}
	code := exitOK
	rules := &allowlist.Rules{}
	var reports []checkReport
	if *config != "" {
		r, cfg := checkConfig(*config)
		if !r.Valid {
			code = exitFail
		}
		if cfg != nil {
			rules = &cfg.Rules
		}
		reports = append(reports, r)
		if !*asJSON {
			printConfigReport(stdout, r, cfg)
		}
	}
	for _, path := range paths {
		r := checkOne(path, rules)
		if !r.Valid {
			code = exitFail
		}
		reports = append(reports, r)
		if !*asJSON {
			printReport(stdout, r)
		}
	}
	if *asJSON {
		out, _ := json.MarshalIndent(reports, "", "  ")
		stdout.Write(append(termsafe.JSON(out), '\n')) // a key's bidi override as \u202e, as the text output escapes it
	}
	return code
}

// checkConfig loads the config as serve does and reports, as format
// "config", its problems and what serve would refuse at start. cfg is nil
// when the file itself does not load.
func checkConfig(file string) (checkReport, *policy.Config) {
	r := checkReport{File: file, Format: "config"}
	cfg, err := policy.LoadConfig(file)
	if err != nil {
		r.Errors = configProblems(err)
		return r, nil
	}
	host, _ := proxy.ReadHostAddrs() // unknown: no host-address warning, the rest stands
	r.Errors, r.Warnings = policy.CheckConfig(cfg, host)
	if msg := policy.SandboxMemoryWarning(cfg.Sandbox, hostFileMax()); msg != "" {
		r.Warnings = append(r.Warnings, msg)
	}
	if _, err := loadBroker(cfg.TLS); err != nil { // the CA serve would read at start
		r.Errors = append(r.Errors, err.Error())
	}
	r.Valid = len(r.Errors) == 0
	return r, &cfg
}

func printConfigReport(w io.Writer, r checkReport, cfg *policy.Config) {
	for _, e := range r.Errors {
		printLine(w, "%s: %s", r.File, e)
	}
	for _, e := range r.Warnings {
		printLine(w, "%s: warning: %s", r.File, e)
	}
	if r.Valid {
		printLine(w, "%s: ok config, %d integrations", r.File, len(cfg.Integrations))
	}
}

func checkOne(path string, rules *allowlist.Rules) checkReport {
	m, file, ps, err := allowlist.Load(path, rules)
	r := checkReport{File: file}
	if file == "" {
		r.File = path
	}
	if err != nil {
		r.Errors = []string{strings.TrimPrefix(err.Error(), r.File+": ")}
		return r
	}
	for _, p := range ps {
		if p.Severity == allowlist.Warning {
			r.Warnings = append(r.Warnings, p.String())
		} else {
			r.Errors = append(r.Errors, p.String())
		}
	}
	if m == nil {
		if looksLikeConfig(path) {
			// A new operator's first try (round 36): "check egressd.yaml"
			// read the config as a manifest and answered with a JSON error.
			r.Errors = append(r.Errors, "this looks like an operator config (YAML), not a manifest: check it with egressd check --config "+termsafe.ShellWord(path))
		}
		return r
	}
	for _, k := range m.EnvKeys {
		if why := sandbox.HeldBack(k); why != "" {
			r.Warnings = append(r.Warnings, fmt.Sprintf("declares the variable %s, %s: egressd run passes it only if the operator names it (--env %s, env_passthrough)", k, why, k))
		}
	}
	r.Valid, r.ID, r.Version, r.Format, r.Digest = true, m.ID, m.Version, m.Format.String(), m.Digest()
	r.Entries = []string{}
	for _, e := range m.Entries {
		r.Entries = append(r.Entries, e.String())
	}
	return r
}

// printReport prints one manifest's result for a person: every line is
// passed through termsafe, since paths and keys come from the manifest.
func printReport(w io.Writer, r checkReport) {
	for _, e := range r.Errors {
		printLine(w, "%s: %s", r.File, e)
	}
	for _, e := range r.Warnings {
		printLine(w, "%s: warning: %s", r.File, e)
	}
	if !r.Valid {
		return
	}
	entries := strings.Join(r.Entries, " ")
	if entries == "" {
		entries = "(none: no egress)"
	}
	printLine(w, "%s: ok %s %s (%s) entries: %s digest: %s", r.File, r.ID, r.Version, r.Format, entries, r.Digest)
}

// printLines prints text whose line breaks are its own (an error joining
// problems that are escaped already), escaping each line.
func printLines(w io.Writer, text string) {
	for _, line := range strings.Split(text, "\n") {
		fmt.Fprintln(w, termsafe.String(line))
	}
}

// printLine prints one line meant for a terminal, its control characters
// escaped.
func printLine(w io.Writer, format string, args ...any) {
	fmt.Fprintln(w, termsafe.String(fmt.Sprintf(format, args...)))
}

func configProblems(err error) []string {
	var ce *policy.ConfigError
	if errors.As(err, &ce) {
		return ce.Problems
	}
	return []string{err.Error()}
}

// looksLikeConfig reports a path named as egressd's config files are.
func looksLikeConfig(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	return ext == ".yaml" || ext == ".yml"
}
