package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/egressd/egressd/audit"
)

func runAudit(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: egressd audit verify|report|suggest [flags] FILE...")
		return exitUsage
	}
	switch args[0] {
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
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keyFile := fs.String("key", "", "the HMAC key file of a keyed chain")
	ckptFile := fs.String("checkpoints", "", "a file of checkpoint lines (e.g. egressd's captured stderr) to cross-check")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: egressd audit verify [--key FILE] [--checkpoints FILE] FILE...\n\nChecks the hash chain across the files, oldest first. Exit 0 intact, 1 broken.")
		fs.PrintDefaults()
	}
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
	fmt.Fprintln(stderr, "egressd audit report: not built yet")
	return exitFail
}

func runAuditSuggest(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "egressd audit suggest: not built yet")
	return exitFail
}
