package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/policy"
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
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() == 0 && *config == "" {
		fs.Usage()
		return exitUsage
	}
	code := exitOK
	rules := &allowlist.Rules{}
	if *config != "" {
		cfg, err := policy.LoadConfig(*config)
		if err != nil {
			code = exitFail
			printConfigError(stdout, *config, err)
		} else {
			rules = &cfg.Rules
			if !*asJSON {
				fmt.Fprintf(stdout, "%s: ok config, %d integrations\n", *config, len(cfg.Integrations))
			}
		}
	}
	var reports []checkReport
	for _, path := range fs.Args() {
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
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(reports)
	}
	return code
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

func printReport(w io.Writer, r checkReport) {
	for _, e := range r.Errors {
		fmt.Fprintf(w, "%s: %s\n", r.File, e)
	}
	for _, e := range r.Warnings {
		fmt.Fprintf(w, "%s: warning: %s\n", r.File, e)
	}
	if !r.Valid {
		return
	}
	entries := strings.Join(r.Entries, " ")
	if entries == "" {
		entries = "(none: no egress)"
	}
	fmt.Fprintf(w, "%s: ok %s %s (%s) entries: %s digest: %s\n", r.File, r.ID, r.Version, r.Format, entries, r.Digest)
}

func configProblems(err error) []string {
	var ce *policy.ConfigError
	if errors.As(err, &ce) {
		return ce.Problems
	}
	return []string{err.Error()}
}
