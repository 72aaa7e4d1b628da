package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExplainPrintsAFolderNameOnOneLine is round 45's F3: explain printed
// the error of a missing manifest with the folder's name raw after
// splitting it at line breaks, so a folder named
// "m\negressd: warning: all clear…" printed a line of its own.
func TestExplainPrintsAFolderNameOnOneLine(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m\negressd: warning: all clear")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, errs, code := runCLI(t, "explain", "--manifest", dir, "a.example")
	if code != exitUsage || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "egressd explain: ") || !strings.Contains(errs, `m\x0aegressd: warning`) {
		t.Fatalf("exit %d: %q", code, errs)
	}
}

// TestExplainWithAStateFolderHoldingNoMemorySaysSo is round 45's F4:
// explain --state with an existing folder that holds no versions.json (a
// parent of the real one, a typo) said "allow" for a host whose widening
// waits in the real memory, with no word that it read nothing.
func TestExplainWithAStateFolderHoldingNoMemorySaysSo(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "erp.acme.example"))
	erpFolder(t, dir, "com.acme.erp", "1.1.0", "erp.acme.example", "new.acme.example")
	loadAsServe(t, state, dir)
	empty := t.TempDir()
	out, errs, _ := runCLI(t, "explain", "--manifest", dir, "--state", empty, "new.acme.example")
	if !strings.HasPrefix(out, "allow") || !strings.Contains(errs, filepath.Join(empty, "versions.json")+" does not exist") {
		t.Fatalf("stdout %q\nstderr %q", out, errs)
	}
	if _, errs, _ := runCLI(t, "explain", "--manifest", dir, "--state", state, "new.acme.example"); strings.Contains(errs, "does not exist") {
		t.Fatalf("the real memory: %q", errs)
	}
}
