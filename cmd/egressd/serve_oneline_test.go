package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestServeThatCannotStartOnItsVersionMemorySaysSoInOneLine: a versions.json
// that is a symlink, and a versions.json missing beside versions.lock, stop
// serve (version memory is every integration's, unlike one manifest) with
// one line that names the state file and the reason together (a journal
// line split in two loses the reason from a grep).
func TestServeThatCannotStartOnItsVersionMemorySaysSoInOneLine(t *testing.T) {
	for name, spoil := range map[string]func(t *testing.T, state string){
		"symlinked versions.json": func(t *testing.T, state string) {
			elsewhere := filepath.Join(t.TempDir(), "v.json")
			if err := os.Rename(filepath.Join(state, "versions.json"), elsewhere); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, filepath.Join(state, "versions.json")); err != nil {
				t.Fatal(err)
			}
		},
		"versions.json missing beside versions.lock": func(t *testing.T, state string) {
			if err := os.Remove(filepath.Join(state, "versions.json")); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, "int"), 0o755)
			os.WriteFile(filepath.Join(dir, "int", "manifest.json"), []byte(`{"manifest_version":1,"id":"com.t.one","version":"1.0.0","network":{"connect":["api.one.example"]}}`), 0o600)
			state, cfg := filepath.Join(dir, "state"), filepath.Join(dir, "egressd.yaml")
			os.WriteFile(cfg, []byte("state_dir: "+state+"\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: "+filepath.Join(dir, "audit.log")+"}\nintegrations:\n  - manifest: int\n    listen: unix:"+filepath.Join(dir, "s.sock")+"\n"), 0o600)
			var out, errb lockedBuffer
			sig, done := make(chan os.Signal, 1), make(chan int, 1)
			go func() { done <- serve(context.Background(), []string{"--config", cfg}, &out, &errb, sig) }()
			waitFor(t, &errb, `serving com\.t\.one on`) // it wrote version memory
			sig <- syscall.SIGTERM
			<-done
			spoil(t, state)
			errb = lockedBuffer{}
			if code := serve(context.Background(), []string{"--config", cfg}, &out, &errb, make(chan os.Signal, 1)); code == exitOK {
				t.Fatalf("serve started: %s", errb.String())
			}
			lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
			var found bool
			for _, l := range lines {
				if strings.Contains(l, "cannot start") {
					found = strings.Contains(l, "versions.json") // version memory is every integration's: no folder to name
				}
			}
			if !found {
				t.Fatalf("the cannot-start line does not name versions.json on one line:\n%s", errb.String())
			}
		})
	}
}
