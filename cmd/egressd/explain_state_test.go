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
		{"approve", "--state", typo, "com.acme.erp", "2.0.0"},
	} {
		out, errs, code := runCLI(t, args...)
		if code == exitOK || strings.HasPrefix(out, "allow") || !strings.Contains(errs, "no version memory at "+typo) {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errs)
		}
	}
}

// TestExplainWithListenDecidesAsServeForANewIDOnABoundListener is issue
// 13's B9: a new folder with another id on a listener bound to com.acme.erp
// waits for approval in serve, but explain --state said allow. explain now
// takes --listen (or --config) to apply the listener binding, and without
// either says that it cannot know it.
func TestExplainWithListenDecidesAsServeForANewIDOnABoundListener(t *testing.T) {
	state, root := t.TempDir(), t.TempDir()
	const listen = "127.0.0.1:13146"
	first := erpFolder(t, mkdir(t, filepath.Join(root, "app")), "com.acme.erp", "1.0.0", "a.example.com")
	loadOnListener(t, state, first, listen)
	second := erpFolder(t, mkdir(t, filepath.Join(root, "app2")), "com.acme.erpnext", "1.0.0", "a.example.com", "exfil.example.com")

	out, errs, code := runCLI(t, "explain", "--state", state, "--listen", listen, "--manifest", second, "exfil.example.com")
	if code != exitFail || !strings.HasPrefix(out, "deny pending_approval exfil.example.com:443") {
		t.Fatalf("--listen: exit %d\n%s%s", code, out, errs)
	}
	out, errs, _ = runCLI(t, "explain", "--state", state, "--manifest", second, "exfil.example.com")
	if !strings.Contains(errs, "without --config or --listen, explain cannot know which listener serves") {
		t.Fatalf("no listener given, and no word about it:\n%s%s", out, errs)
	}
}
