package safefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeFolderRefusesALinkOrAFilePlantedAtItsName: the state folder's
// owner can put a symlink (to a folder of root's) or a file where egressd
// makes a folder; neither is followed or used, and nothing is made where
// the link points. A missing folder is made 0700, an existing one opened.
func TestMakeFolderRefusesALinkOrAFilePlantedAtItsName(t *testing.T) {
	state, victim := t.TempDir(), t.TempDir()
	link, file := filepath.Join(state, "sandbox"), filepath.Join(state, "audit")
	os.Symlink(victim, link)
	os.WriteFile(file, nil, 0o600)
	for _, p := range []string{link, file} {
		if f, err := MakeFolder(p); err == nil || !strings.Contains(err.Error(), p+" is not a folder") {
			f.Close()
			t.Fatalf("%s: %v", p, err)
		}
	}
	if left, _ := os.ReadDir(victim); len(left) != 0 {
		t.Fatalf("made %v through the link", left)
	}
	made := filepath.Join(state, "new", "sandbox-images")
	for range 2 { // made, then opened
		f, err := MakeFolder(made)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		f.Close()
		if !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v", made, st.Mode())
		}
	}
}

// TestMakeFolderRefusesAFolderAnotherUserMadeFirst: the state folder's
// owner can make STATE/sandbox as a real folder of its own before root's
// first run, and then swap the entries root makes in it; root refuses it.
func TestMakeFolderRefusesAFolderAnotherUserMadeFirst(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("chown needs root in CI")
		}
		t.Skip("chown needs root")
	}
	planted := filepath.Join(t.TempDir(), "sandbox")
	os.Mkdir(planted, 0o700)
	os.Chown(planted, 4242, 4242)
	if f, err := MakeFolder(planted); err == nil || !strings.Contains(err.Error(), "owned by uid 4242") {
		f.Close()
		t.Fatalf("%v", err)
	}
	os.Chown(planted, 0, 0)
	os.Chmod(planted, 0o777)
	if f, err := MakeFolder(planted); err == nil || !strings.Contains(err.Error(), "no one else may write") {
		f.Close()
		t.Fatalf("%v", err)
	}
}
