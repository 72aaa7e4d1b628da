package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestServeOfARelativeConfigFromAShellThatEnteredThroughALinkIsRefused
// is the run test's attack on serve: "serve --config cfg.yaml" started in
// the folder (as a service manager does, PWD naming the folder itself),
// the manifest's id changed and its list widened, then the same command
// typed from a shell that entered the folder through a link. filepath.Abs
// trusted PWD, so the config, and the manifest folder it names, were
// another place, and the wider list was served as a first load. Now a
// relative config path from such a shell is refused, naming the link.
func TestServeOfARelativeConfigFromAShellThatEnteredThroughALinkIsRefused(t *testing.T) {
	d := newPWDLinkFolder(t)
	cfg := "state_dir: st\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: audit.log}\nintegrations:\n  - manifest: F\n    listen: 127.0.0.1:0\n"
	if err := os.WriteFile(filepath.Join(d.real, "cfg.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() (*lockedBuffer, func()) {
		stderr, done, sig := &lockedBuffer{}, make(chan int, 1), make(chan os.Signal, 1)
		go func() {
			done <- serve(context.Background(), []string{"--config", "cfg.yaml"}, &lockedBuffer{}, stderr, sig)
		}()
		return stderr, func() {
			sig <- syscall.SIGTERM
			if code := <-done; code != 0 {
				t.Fatalf("serve exit %d:\n%s", code, stderr.String())
			}
		}
	}
	d.manifest(t, "com.test.pwd.a", "a.example")
	t.Chdir(d.real)
	stderr, stop := start()
	waitFor(t, stderr, `serving com\.test\.pwd\.a on 127\.0\.0\.1:\d+`)
	stop()

	d.manifest(t, "com.test.pwd.b", "a.example", "evil.example")
	t.Chdir(d.link) // PWD=…/link, as the shell's cd sets it
	if os.Getenv("PWD") != d.link {
		t.Fatalf("PWD is %q, not the link spelling", os.Getenv("PWD"))
	}
	stderr = &lockedBuffer{}
	code := serve(context.Background(), []string{"--config", "cfg.yaml"}, &lockedBuffer{}, stderr, make(chan os.Signal, 1))
	if code == 0 || !strings.Contains(stderr.String(), "entered through a link") {
		t.Fatalf("serve --config cfg.yaml with PWD=%s: exit %d, want a refusal naming the link:\n%s", d.link, code, stderr.String())
	}
}
