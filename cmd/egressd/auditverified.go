package main

import (
	"fmt"
	"strings"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/internal/termsafe"
)

// readVerified is how report and suggest read audit log files: verified as
// audit verify verifies them (--key, --checkpoints) and read in the same
// linear pass over one open of each file (audit.VerifyAndRead), so what
// they say comes from the bytes verified. code is the exit status to stop
// with when err is set. runLink is audit.VerifyOptions.RunLink.
func readVerified(files, keyFiles []string, ckptFile, runLink string) (v audit.Verdict, recs []audit.Record, code int, err error) {
	opts, code, err := verifyOptions(keyFiles, ckptFile)
	if err != nil {
		return audit.Verdict{}, nil, code, err
	}
	opts.RunLink = runLink
	v, recs, err = audit.VerifyAndRead(files, opts)
	if err != nil {
		return audit.Verdict{}, nil, exitFail, err
	}
	return v, recs, exitOK, nil
}

// verifyCommand is the audit verify command that checks what a report or
// suggest was given: the same files by the same flags, each word quoted
// for the shell.
func verifyCommand(keyFiles []string, ckptFile, filesFrom, runFiles string, named []string) string {
	words := []string{"egressd", "audit", "verify"}
	for _, k := range keyFiles {
		words = append(words, "--key", termsafe.ShellWord(k))
	}
	for _, f := range []struct{ flag, value string }{{"--checkpoints", ckptFile}, {"--files-from", filesFrom}, {"--run-files", runFiles}} {
		if f.value != "" {
			words = append(words, f.flag, termsafe.ShellWord(f.value))
		}
	}
	for _, n := range named {
		words = append(words, termsafe.ShellWord(n))
	}
	return strings.Join(words, " ")
}

// suggestRefusal is suggest's one line for a log that does not verify. A
// permission suggested from it would carry whatever host a forged line
// names into a manifest the operator approves, so nothing is suggested
// unless the operator asks for it with --unverified.
func suggestRefusal(v audit.Verdict, verify string) string {
	if v.Intact {
		return fmt.Sprintf("LOG NOT PROVEN: intact, %d lines through seq %d, but %s; nothing is suggested from a log that may hold a run no egressd of this log wrote: run %s (or pass --unverified to print the suggestion anyway)",
			v.Lines, v.IntactThrough, termsafe.String(v.Unproven()), verify)
	}
	return fmt.Sprintf("LOG NOT VERIFIED: BROKEN: %s (intact through seq %d, %d lines); nothing is suggested from a log that may have been edited, cut or added to: run %s (or pass --unverified to print the suggestion anyway)",
		termsafe.String(v.Problem), v.IntactThrough, v.Lines, verify)
}
