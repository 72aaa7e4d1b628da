package policy

import (
	"os"
	"path/filepath"
	"testing"
)

// TestEntryForIsTheEntryOfTheSamePlaceWhateverTheFilesAre: run --config
// and explain lend a manifest the exemptions of its config entry. An
// author's manifest that links to another integration's, in either order
// in the config, gets its own entry only (round 34: matched by inode, the
// last entry won, so the author's run could take the other's allow_ports).
func TestEntryForIsTheEntryOfTheSamePlaceWhateverTheFilesAre(t *testing.T) {
	root := t.TempDir()
	victim, evil := filepath.Join(root, "victim"), filepath.Join(root, "evil")
	for _, d := range []string{victim, evil} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	doc := `{"manifest_version":1,"id":"com.test.victim","version":"1.0.0","network":{"connect":["a.example.com"]}}`
	if err := os.WriteFile(filepath.Join(victim, "manifest.json"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(victim, "manifest.json"), filepath.Join(evil, "manifest.json")); err != nil {
		t.Fatal(err)
	}
	v := Integration{Manifest: victim, Listen: "v", Exemptions: Exemptions{AllowPorts: []uint16{8443}}}
	e := Integration{Manifest: filepath.Join(evil, "manifest.json"), Listen: "e"}
	for _, order := range [][]Integration{{v, e}, {e, v}} {
		cfg := Config{Integrations: order}
		for manifest, want := range map[string]string{victim: "v", filepath.Join(victim, "manifest.json"): "v", evil: "e", filepath.Join(evil, "manifest.json"): "e"} {
			if got, ok := cfg.EntryFor(manifest); !ok || got.Listen != want {
				t.Errorf("order %s,%s: EntryFor(%s) = %q %v, want %q", order[0].Listen, order[1].Listen, manifest, got.Listen, ok, want)
			}
		}
	}
	if _, ok := (Config{Integrations: []Integration{v}}).EntryFor(filepath.Join(root, "missing")); ok {
		t.Error("a manifest that does not load has an entry")
	}
}
