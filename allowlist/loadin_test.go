package allowlist

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func manifestWithID(id string) string {
	return `{ "schemaVersion": 1, "id": "` + id + `", "version": "1.0.0", "name": "n", "summary": "s",
  "publisher": { "id": "pub_atk", "name": "atk" },
  "runtime": { "kind": "local-mcp", "command": "sh" },
  "permissions": [{ "kind": "network", "domains": ["api.allowed.example"] }] }`
}

// TestDeployLinkFlippedAfterTheFolderIsOpenedDoesNotChangeTheManifestRead:
// egressd run opens deploy/current (-> rel1) once; the author then points
// the link at another folder. The manifest read is rel1's, through the
// descriptor, not the one the path now names.
func TestDeployLinkFlippedAfterTheFolderIsOpenedDoesNotChangeTheManifestRead(t *testing.T) {
	w := t.TempDir()
	for _, r := range []string{"rel1", "other"} {
		os.Mkdir(filepath.Join(w, r), 0o755)
		if err := os.WriteFile(filepath.Join(w, r, VoiceOSFile), []byte(manifestWithID("com.atk."+r)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(w, "current")
	if err := os.Symlink("rel1", link); err != nil {
		t.Fatal(err)
	}
	folder, err := os.OpenFile(link, os.O_RDONLY, 0) // as sandbox.OpenFolder, which allowlist may not import
	if err != nil {
		t.Fatal(err)
	}
	defer folder.Close()
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("other", link); err != nil {
		t.Fatal(err)
	}
	m, file, ps, err := LoadIn(folder, link, nil)
	if err != nil || m == nil {
		t.Fatalf("LoadIn: %v %v", err, ps)
	}
	if m.ID != "com.atk.rel1" {
		t.Fatalf("read %s's manifest through the flipped link, want rel1's", m.ID)
	}
	if file != filepath.Join(link, VoiceOSFile) {
		t.Fatalf("file %q", file)
	}
}

// TestManifestFileSymlinkIsNotFollowedThroughTheFolder: the manifest name
// in the folder held open is a symlink to a file elsewhere; it is refused.
func TestManifestFileSymlinkIsNotFollowedThroughTheFolder(t *testing.T) {
	w := t.TempDir()
	dir := filepath.Join(w, "rel1")
	os.Mkdir(dir, 0o755)
	os.WriteFile(filepath.Join(w, "elsewhere.json"), []byte(manifestWithID("com.atk.elsewhere")), 0o644)
	if err := os.Symlink("../elsewhere.json", filepath.Join(dir, VoiceOSFile)); err != nil {
		t.Fatal(err)
	}
	folder, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer folder.Close()
	_, _, _, err = LoadIn(folder, dir, nil)
	if err == nil || !strings.Contains(err.Error(), "is a symlink") {
		t.Fatalf("a symlinked manifest was read: %v", err)
	}
}
