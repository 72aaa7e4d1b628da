package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTwoSpellingsOfOneListenerAreOneListener: LoadConfig (which check,
// serve's start and every reload read) refuses two integrations on one
// address however it is spelled, manifests: folders included.
func TestTwoSpellingsOfOneListenerAreOneListener(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a", "b", "mdir/b"} {
		os.MkdirAll(filepath.Join(dir, n), 0o755)
	}
	for name, pair := range map[string][2]string{
		"mapped IPv4":       {"127.0.0.1:8080", `"[::ffff:127.0.0.1]:8080"`},
		"unix, dotted":      {"unix:" + dir + "/s/a.sock", "unix:" + dir + "/s/./x/../a.sock"},
		"manifests: folder": {"unix:" + dir + "/s/b.sock", ""},
	} {
		doc := "integrations:\n  - manifest: a\n    listen: " + pair[0] + "\n"
		if pair[1] != "" {
			doc += "  - manifest: b\n    listen: " + pair[1] + "\n"
		} else {
			doc += "manifests:\n  - dir: mdir\n    listen: unix:" + dir + "/s/{name}.sock\n"
		}
		file := filepath.Join(dir, "egressd.yaml")
		os.WriteFile(file, []byte(doc), 0o600)
		_, err := LoadConfig(file)
		if err == nil || !strings.Contains(err.Error(), "two integrations cannot share one listener") {
			t.Errorf("%s: %v", name, err)
		}
	}
	os.WriteFile(filepath.Join(dir, "egressd.yaml"), []byte("integrations:\n  - manifest: a\n    listen: 127.0.0.1:0\n  - manifest: b\n    listen: 127.0.0.1:0\n"), 0o600)
	if _, err := LoadConfig(filepath.Join(dir, "egressd.yaml")); err != nil {
		t.Errorf("port 0 is a fresh port each time: %v", err)
	}
}
