package allowlist

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAManifestInAFolderWhoseNameIsNotUTF8IsRefused: version memory wrote
// the folder "app\xff" as "app\uFFFD", the name of another folder, which
// then ran under the first one's id and approved list with no claim
// notice (round 12 trust-chain attacker). A path that is not valid UTF-8
// cannot be named exactly, so it is refused at load.
func TestAManifestInAFolderWhoseNameIsNotUTF8IsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "app\xff")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skip("this file system refuses the name:", err)
	}
	os.WriteFile(filepath.Join(dir, VoiceOSFile), []byte(`{"schemaVersion":1,"id":"com.test.app","version":"1.0.0","runtime":{"kind":"local-mcp","command":"node"},"permissions":[{"kind":"network","domains":["a.example"]}]}`), 0o644)
	for _, p := range []string{dir, filepath.Join(dir, VoiceOSFile)} {
		if _, _, _, err := Load(p, nil); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Fatalf("Load(%q) = %v, want a refusal naming UTF-8", p, err)
		}
		f, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, err = LoadIn(f, p, nil)
		f.Close()
		if err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Fatalf("LoadIn(%q) = %v, want a refusal naming UTF-8", p, err)
		}
	}
}
