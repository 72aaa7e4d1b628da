package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestExplainAndStateListRefuseAStateFolderThatDoesNotExist is issue 13's
// B10: a mistyped --state read as empty version memory, so explain said
// "allow" (exit 0) for a host serve refuses, and state list printed 0 ids.
func TestExplainAndStateListRefuseAStateFolderThatDoesNotExist(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "erp.acme.example"))
	erpFolder(t, dir, "com.acme.erp", "2.0.0", "erp.acme.example", "new.acme.example")
	loadAsServe(t, state, dir)
	typo := state + "3"
	for _, args := range [][]string{
		{"explain", "--state", typo, "--manifest", dir, "new.acme.example"},
		{"state", "--state", typo, "list"},
		{"approve", "--yes", "--state", typo, "com.acme.erp", "2.0.0"},
	} {
		out, errs, code := runCLI(t, args...)
		if code == exitOK || strings.HasPrefix(out, "allow") || !strings.Contains(errs, "no version memory at "+typo) {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errs)
		}
	}
}

// TestExplainJudgesANewIDOnAKnownListenerAsItsOwnIntegration: issue 13's
// B9 had explain take --listen to apply the listener's binding; a listener
// is not a place any more (issue 17, fifth attacker), so a new folder with
// a new id on a listener com.acme.erp used is its own first load in serve
// and in explain alike, and --listen changes nothing.
func TestExplainJudgesANewIDOnAKnownListenerAsItsOwnIntegration(t *testing.T) {
	state, root := t.TempDir(), t.TempDir()
	const listen = "127.0.0.1:13146"
	first := erpFolder(t, mkdir(t, filepath.Join(root, "app")), "com.acme.erp", "1.0.0", "a.example.com")
	loadOnListener(t, state, first, listen)
	second := erpFolder(t, mkdir(t, filepath.Join(root, "app2")), "com.acme.erpnext", "1.0.0", "b.example.com")
	for _, args := range [][]string{
		{"explain", "--state", state, "--listen", listen, "--manifest", second},
		{"explain", "--state", state, "--manifest", second},
	} {
		if out, errs, code := runCLI(t, append(args, "b.example.com")...); code != exitOK || !strings.HasPrefix(out, "allow") {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errs)
		}
		if out, errs, code := runCLI(t, append(args, "a.example.com")...); code != exitFail || !strings.HasPrefix(out, "deny not_allowlisted") {
			t.Fatalf("%v: com.acme.erp's list in force for another folder: exit %d\n%s%s", args, code, out, errs)
		}
	}
}

// TestExplainPendingLineDoesNotPassAFolderNamesTerminalEscapes is round
// 9's b3: explain --state printed its "pending:" line raw, so a folder
// name from an unpacked archive carrying OSC and CSI sequences (retitle the
// window, clear the screen) reached the operator's terminal. It is escaped
// as every other line explain prints.
func TestExplainPendingLineDoesNotPassAFolderNamesTerminalEscapes(t *testing.T) {
	state := t.TempDir()
	dir := mkdir(t, filepath.Join(t.TempDir(), "app\x1b]0;PWNED\a\x1b[2J"))
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "erp.acme.example"))
	erpFolder(t, dir, "com.acme.erp2", "1.0.0", "erp.acme.example") // an id change: the notice names the folder
	out, errs, _ := runCLI(t, "explain", "--state", state, "--manifest", dir, "erp.acme.example")
	if !strings.Contains(out, "pending:") || !strings.Contains(out, `\x1b]0;PWNED`) || strings.ContainsAny(out+errs, "\x1b\a") {
		t.Fatalf("explain printed:\n%q\n%q", out, errs)
	}
}

// TestExplainsForgetCommandNamesTheStateItRead: explain --state DIR of a
// manifest below the version seen advised "egressd state forget ID" with no
// --state: pasted as root, it forgot the id in /var/lib/egressd, another
// memory (round 17 trust-chain attacker, MEDIUM). explain reads a
// read-only copy; its commands name the folder it was read from.
func TestExplainsForgetCommandNamesTheStateItRead(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "2.0.0", "erp.acme.example"))
	erpFolder(t, dir, "com.acme.erp", "1.0.0", "erp.acme.example")
	out, errs, _ := runCLI(t, "explain", "--state", state, "--manifest", dir, "erp.acme.example")
	if !strings.Contains(out+errs, "egressd state --state "+state+" forget com.acme.erp") {
		t.Fatalf("explain's forget command does not name --state %s:\n%s%s", state, out, errs)
	}
}
