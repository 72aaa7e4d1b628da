package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolveProgramBindsOnlyThePATHProgram: a bare name found in the
// launcher's PATH outside the system folders is bound alone; a manifest's
// relative path that climbs out through a symlink is refused.
func TestResolveProgramBindsOnlyThePATHProgram(t *testing.T) {
	tools, dir := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(tools, "mytool"), []byte("#!/bin/sh\n"), 0o755)
	t.Setenv("PATH", tools+":/usr/bin:/bin")
	p, err := ResolveProgram("mytool", dir, false)
	if err != nil || p.Bind != filepath.Join(tools, "mytool") || p.Path != p.Bind {
		t.Fatalf("mytool: %+v %v", p, err)
	}
	if p, err := ResolveProgram("sh", dir, false); err != nil || p.Bind != "" {
		t.Fatalf("sh from a system folder: %+v %v", p, err)
	}
	os.Symlink(tools, filepath.Join(dir, "bin"))
	if _, err := ResolveProgram("bin/mytool", dir, false); err == nil || !strings.Contains(err.Error(), "outside the integration folder") {
		t.Fatalf("symlink out: %v", err)
	}
	if p, err := ResolveProgram("bin/mytool", dir, true); err != nil || p.Bind != filepath.Join(tools, "mytool") {
		t.Fatalf("the operator's choice: %+v %v", p, err)
	}
	os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	if p, err := ResolveProgram("./run.sh", dir, false); err != nil || p.Bind != "" || p.Path != filepath.Join(dir, "run.sh") {
		t.Fatalf("in the folder: %+v %v", p, err)
	}
}
