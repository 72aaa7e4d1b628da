package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/internal/termsafe"
	"github.com/egressd/egressd/policy"
	"golang.org/x/term"
)

// approval is what one egressd approve command asks for: a manifest's
// list (manifest, at place), or the pending record of id at version
// (with digest, at place when --folder names one).
type approval struct {
	manifest            *allowlist.Manifest
	place               string
	newID               bool
	id, version, digest string
}

// apply makes the approval in mem and returns what it bound. shown is
// what the operator was shown (apply's result on policy.PreviewMemory),
// nil for that preview: an approval that would bind anything else binds
// nothing (policy.ErrMemoryChanged).
func (q approval) apply(mem *policy.Memory, shown []policy.Approval) ([]policy.Approval, error) {
	if q.manifest != nil {
		return mem.ApproveManifest(q.manifest, q.place, q.newID, shown)
	}
	return mem.ApprovePending(q.id, q.version, q.digest, q.place, shown)
}

// showApprovals prints what approving will bind, before it is approved:
// an operator who reads it only afterwards has already let it through.
// The lists are the very ones approved next: --manifest's file was read
// once, and a pending record is named by its digest.
func showApprovals(w io.Writer, preview []policy.Approval, stateDir string) {
	for _, a := range preview {
		fmt.Fprintf(w, "to approve: %s %s, list digest %s (%s) in %s\n", a.ID, a.Version, a.Digest, a.What, policy.StatePath(stateDir))
		showBinding(w, a, stateDir)
	}
}

// showBinding prints what approving a binds (policy.Approval.Lines), as
// every preview path prints it. The preview and the approval print it
// alike, from the same policy.Approval.
func showBinding(w io.Writer, a policy.Approval, stateDir string) {
	for _, line := range a.Lines(stateDir) {
		printLine(w, "  %s", line)
	}
}

// asksOn reports whether approve will ask on in (a terminal, and no
// --yes), and whether stdout is not that terminal's screen too: then the
// preview is shown on stderr as well, beside the question, so the question
// always follows what it is about.
func asksOn(in *os.File, yes bool, stdout io.Writer) (asks, elsewhere bool) {
	if yes || !term.IsTerminal(int(in.Fd())) {
		return false, false
	}
	f, isFile := stdout.(*os.File)
	return true, !isFile || !term.IsTerminal(int(f.Fd()))
}

// confirm asks on a terminal whether to approve what was shown, and
// returns exitOK for yes. With --yes it does not ask. With stdin not a
// terminal (a script, a pipe, a test) nobody can answer, so it refuses,
// naming --yes, rather than approve what no one read.
func confirm(in *os.File, yes bool, stderr io.Writer) int {
	if yes {
		return exitOK
	}
	if !term.IsTerminal(int(in.Fd())) {
		fmt.Fprintln(stderr, "egressd approve: nothing approved: stdin is not a terminal to confirm on; review what is shown above and give --yes to approve it")
		return exitUsage
	}
	fmt.Fprint(stderr, "approve it? [y/N] ")
	answer, _ := bufio.NewReader(io.LimitReader(in, 256)).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return exitOK
	}
	printLine(stderr, "egressd approve: nothing approved (answered %s)", termsafe.ShellWord(strings.TrimSpace(answer)))
	return exitFail
}
