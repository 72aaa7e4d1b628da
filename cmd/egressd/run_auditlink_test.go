package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRefusesASymlinkedAuditFolderInTheState is the sixth attacker's
// b8: the state folder may be the service user's, who replaced
// STATE/audit with a symlink; root's "egressd run" then created its log
// and replaced NAME.lastrun in whatever folder the link named. run now
// refuses a STATE/audit that is not a real folder, in one line, and writes
// nothing through it.
func TestRunRefusesASymlinkedAuditFolderInTheState(t *testing.T) {
	state, target := t.TempDir(), t.TempDir()
	if err := os.Symlink(target, filepath.Join(state, "audit")); err != nil {
		t.Fatal(err)
	}
	_, errs, code := runCLI(t, "run", "--state", state, "--resolver", "127.0.0.1:9", "../../configs/examples/coffee-tracker", "--", "/bin/true")
	if code == exitOK || !strings.Contains(errs, filepath.Join(state, "audit")+" is not a folder") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if left, _ := os.ReadDir(target); len(left) != 0 {
		t.Fatalf("run wrote through the link: %v", left)
	}
}
