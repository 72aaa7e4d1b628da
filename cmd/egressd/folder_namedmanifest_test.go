package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egressd/egressd/policy"
)

// mkdirNamed makes dir/name, a folder, and returns it.
func mkdirNamed(t *testing.T, dir, name string) string {
	t.Helper()
	sub := filepath.Join(dir, name)
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	return sub
}

// TestAFolderNamedManifestJSONIsRefusedAndForgetOfItLeavesItsParentsBinding
// is round 30's s7c.sh and s7.sh, after round 32: folder m is bound to
// com.x; a folder inside it literally named manifest.json claimed com.x,
// and "state forget --folder m/manifest.json" was read as m's manifest
// file and forgot m's (the owner's) binding. Such a folder is now refused
// at load (a path named like a manifest file must be the file: round 32
// swapped the file for a folder to load a new id as a first load), so it
// binds nothing; forget --folder naming it names that folder (a path that
// is a folder is a folder place whatever its name), never its parent.
func TestAFolderNamedManifestJSONIsRefusedAndForgetOfItLeavesItsParentsBinding(t *testing.T) {
	state, m := t.TempDir(), t.TempDir()
	doc := `{"schemaVersion":1,"id":"com.x","name":"x","version":"1.0.0","runtime":{"kind":"local-mcp","command":"node","args":["s.mjs"]},"permissions":[{"kind":"network","domains":["x.example"]}]}`
	if err := os.WriteFile(filepath.Join(m, "voiceos.integration.json"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if o := loadAsServe(t, state, m); o.Result != policy.Loaded {
		t.Fatalf("m's first load: %+v", o)
	}
	y := mkdirNamed(t, m, "manifest.json")
	if o := loadAsServe(t, state, erpFolder(t, y, "com.x", "1.0.0", "x.example")); o.Result != policy.Failed || o.Err == nil || !strings.Contains(o.Err.Error(), "is a folder, not a regular file") {
		t.Fatalf("the folder named manifest.json was not refused: %+v", o)
	}
	runBinary(t, "state", "--state", state, "forget", "--folder", y) // nothing to forget there
	if list := stateList(t, state); !strings.Contains(list, "folder "+m+": com.x") || strings.Contains(list, y) {
		t.Fatalf("forget --folder of the folder named manifest.json touched its parent's binding:\n%s", list)
	}
}
