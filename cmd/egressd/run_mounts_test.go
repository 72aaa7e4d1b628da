package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRunMountNestedInTheIntegrationFolderIsReadOnly: the integration
// folder was bound recursively but only its top mount was made read-only,
// so a host mount under it (a node_modules volume) was writable from
// inside: the program planted code the host would run later.
func TestRunMountNestedInTheIntegrationFolderIsReadOnly(t *testing.T) {
	e := newSandboxEnv(t)
	nested := filepath.Join(e.dir, "node_modules")
	os.Mkdir(nested, 0o755)
	if err := unix.Mount("tmpfs", nested, "tmpfs", 0, "size=1m,mode=0777"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("mount tmpfs:", err)
		}
		t.Skip("mount tmpfs:", err)
	}
	t.Cleanup(func() { unix.Unmount(nested, unix.MNT_DETACH) })
	out, errs, _ := e.run(`echo planted > node_modules/index.js && echo wrote || echo refused`)
	if _, err := os.Stat(filepath.Join(nested, "index.js")); err == nil || !strings.Contains(out, "refused") {
		t.Fatalf("the program wrote into a nested host mount:\nstdout %s\nstderr %s", out, errs)
	}
}
