package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/audit"
)

const auditUsage = `usage: egressd audit verify|report|suggest [flags] FILE...

  verify   prove an audit log is intact (exit 0 intact, 1 broken)
  report   what each integration used, was refused, and does not need
  suggest  the minimal network permission for what was observed

Run "egressd audit COMMAND --help" for its flags.`

func runAudit(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, auditUsage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprintln(stderr, auditUsage) // run() hands stdout here when help is asked for
		return exitUsage
	case "verify":
		return runAuditVerify(args[1:], stdout, stderr)
	case "report":
		return runAuditReport(args[1:], stdout, stderr)
	case "suggest":
		return runAuditSuggest(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "egressd audit: unknown command %q (verify, report, suggest)\n", args[0])
	return exitUsage
}

func runAuditVerify(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("audit verify", "usage: egressd audit verify [--key FILE] [--checkpoints FILE] FILE...\n\nChecks the hash chain across the files, oldest first. Exit 0 intact, 1 broken.", stderr)
	keyFile := fs.String("key", "", "the HMAC key file of a keyed chain")
	ckptFile := fs.String("checkpoints", "", "a file of checkpoint lines (e.g. egressd's captured stderr) to cross-check")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		if err == nil {
			fs.Usage()
		}
		return exitUsage
	}
	var opts audit.VerifyOptions
	if *keyFile != "" {
		key, err := os.ReadFile(*keyFile)
		if err != nil {
			fmt.Fprintln(stderr, "egressd audit verify:", err)
			return exitUsage
		}
		opts.Key = key
	}
	if *ckptFile != "" {
		f, err := os.Open(*ckptFile)
		if err != nil {
			fmt.Fprintln(stderr, "egressd audit verify:", err)
			return exitUsage
		}
		opts.Checkpoints, err = audit.ReadCheckpoints(f)
		f.Close()
		if err != nil {
			fmt.Fprintln(stderr, "egressd audit verify:", err)
			return exitUsage
		}
	}
	v, err := audit.Verify(fs.Args(), opts)
	if err != nil {
		fmt.Fprintln(stderr, "egressd audit verify:", err)
		return exitUsage
	}
	kind := "unkeyed (SHA-256)"
	if v.Keyed {
		kind = "keyed (HMAC-SHA-256, key id " + v.KeyID + ")"
	}
	if v.Intact {
		fmt.Fprintf(stdout, "intact: %d lines through seq %d, %s, %d checkpoints cross-checked\n", v.Lines, v.IntactThrough, kind, v.Checkpoints)
	} else {
		fmt.Fprintf(stdout, "BROKEN: %s\nintact through seq %d (%d lines), %s\n", v.Problem, v.IntactThrough, v.Lines, kind)
	}
	fmt.Fprintf(stdout, "proves: %s\n", v.Proves)
	if v.Intact {
		return exitOK
	}
	return exitFail
}

func runAuditReport(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("audit report", "usage: egressd audit report [--manifest PATH]... [--format text|json|html] FILE...", stderr)
	var manifests multiFlag
	fs.Var(&manifests, "manifest", "an integration's manifest (file or folder), repeatable; default: the paths recorded in the log")
	format := fs.String("format", "text", "text, json or html")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		if err == nil {
			fs.Usage()
		}
		return exitUsage
	}
	recs, err := audit.ReadFiles(fs.Args())
	if err != nil {
		fmt.Fprintln(stderr, "egressd audit report:", err)
		return exitFail
	}
	if len(manifests) == 0 {
		for _, r := range recs {
			if r.Event == string(audit.Policy) && r.Manifest != "" && !slices.Contains(manifests, r.Manifest) {
				manifests = append(manifests, r.Manifest)
			}
		}
	}
	declared := map[string][]string{}
	for _, path := range manifests {
		m, _, _, err := allowlist.Load(path, nil)
		if err != nil || m == nil {
			fmt.Fprintf(stderr, "egressd audit report: warning: manifest %s not read; its unused entries are not reported\n", path)
			continue
		}
		for _, e := range m.Entries {
			declared[m.ID] = append(declared[m.ID], e.String())
		}
		if declared[m.ID] == nil {
			declared[m.ID] = []string{}
		}
	}
	rep := audit.BuildReport(recs, declared)
	rep.Files = fs.Args()
	switch *format {
	case "text":
		err = audit.WriteText(stdout, rep)
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	case "html":
		err = audit.WriteHTML(stdout, rep)
	default:
		fmt.Fprintf(stderr, "egressd audit report: --format must be text, json or html (%q)\n", *format)
		return exitUsage
	}
	if err != nil {
		fmt.Fprintln(stderr, "egressd audit report:", err)
		return exitFail
	}
	return exitOK
}

func runAuditSuggest(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("audit suggest", "usage: egressd audit suggest [--format voiceos|sollar] [--integration ID] FILE...\n\nPrints the minimal network permission covering what the log observed.", stderr)
	format := fs.String("format", "voiceos", "voiceos (a permissions[] element) or sollar (the network member)")
	integration := fs.String("integration", "", "the integration id, when the log holds several")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		if err == nil {
			fs.Usage()
		}
		return exitUsage
	}
	f := map[string]allowlist.Format{"voiceos": allowlist.VoiceOS, "sollar": allowlist.Sollar}[*format]
	if f == allowlist.Unknown {
		fmt.Fprintf(stderr, "egressd audit suggest: --format must be voiceos or sollar (%q)\n", *format)
		return exitUsage
	}
	recs, err := audit.ReadFiles(fs.Args())
	if err != nil {
		fmt.Fprintln(stderr, "egressd audit suggest:", err)
		return exitFail
	}
	observed := audit.ObservedHosts(recs)
	id := *integration
	if id == "" {
		if len(observed) > 1 {
			fmt.Fprintln(stderr, "egressd audit suggest: the log holds several integrations; pass --integration ID")
			return exitUsage
		}
		for k := range observed {
			id = k
		}
	}
	entries, skipped := allowlist.Suggest(observed[id], nil)
	for _, s := range skipped {
		fmt.Fprintf(stderr, "egressd audit suggest: %s cannot be a manifest entry; left out\n", s)
	}
	out, err := allowlist.NetworkFragment(f, entries)
	if err != nil {
		fmt.Fprintln(stderr, "egressd audit suggest:", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "%s\n", out)
	return exitOK
}
