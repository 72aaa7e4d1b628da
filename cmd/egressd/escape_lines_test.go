package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The attacker's r4: a folder name holding a terminal escape and a line
// break followed by a fake checkpoint. approve's output for an id change
// names the folder; it must reach the terminal escaped, on one line.
func TestApproveOutputEscapesAHostileFolderName(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "plugin\x1b]0;PWNED\x07\x1b[2J\n{\"event\":\"checkpoint\",\"chain\":\"c\",\"seq\":9}")
	os.MkdirAll(dir, 0o755)
	write := func(id string) {
		os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"manifest_version":1,"id":"`+id+`","version":"1.0.0","network":{"connect":["api.example.com"]}}`), 0o600)
	}
	state := filepath.Join(root, "state")
	write("com.x.esc")
	if _, errOut, code := runCLI(t, "approve", "--yes", "--state", state, "--manifest", dir, "--new-id"); code != 0 {
		t.Fatalf("first approval: %d %s", code, errOut)
	}
	write("com.x.esc2")
	out, errOut, _ := runCLI(t, "approve", "--yes", "--state", state, "--manifest", dir)
	both := out + errOut
	if strings.ContainsAny(both, "\x1b\x07") || strings.Contains(both, "\n{") {
		t.Errorf("raw control characters from the folder name reach the terminal:\n%q", both)
	}
	if !strings.Contains(both, `plugin\x1b]0;PWNED\x07\x1b[2J\x0a{`) {
		t.Errorf("the folder name is not shown escaped:\n%q", both)
	}
}
