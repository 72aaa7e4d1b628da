package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestARunRefusedAtAuditStartLeavesNoEmptyRunFile is round 19's t14 and
// t13: a run refused when its audit log could not start (a mistyped
// key_file, a lock file that is not a file) left an empty
// STATE/audit/ID.PID.log, and every later verify of the id's files failed
// on it; the lock error named /proc/self/fd/N/… instead of the state
// folder. No run file is left, and the error names the real lock path.
func TestARunRefusedAtAuditStartLeavesNoEmptyRunFile(t *testing.T) {
	e := newSandboxEnv(t)
	logs := func() []string {
		m, _ := filepath.Glob(filepath.Join(e.state, "audit", "*.log"))
		return m
	}
	perRun := func(yaml string) (string, int) {
		cmd := e.configured(yaml, "true")
		cmd.Args = e.perRunCommand(yaml, e.dir)
		_, errs, code := runCmd(t, cmd)
		return errs, code
	}
	errs, code := perRun("audit:\n  key_file: " + filepath.Join(t.TempDir(), "kye") + "\n")
	if code == 0 || len(logs()) != 0 {
		t.Fatalf("a missing key file: exit %d, run files %v\n%s", code, logs(), errs)
	}
	lock := filepath.Join(e.state, "audit", "com.test.sandboxed.lastrun.lock")
	if err := os.MkdirAll(lock, 0o700); err != nil {
		t.Fatal(err)
	}
	errs, code = perRun("audit:\n  checkpoints: stderr\n")
	if code == 0 || len(logs()) != 0 || !strings.Contains(errs, lock) || strings.Contains(errs, "/proc/self/fd") {
		t.Fatalf("a lock file that is a folder: exit %d, run files %v; want the error to name %s\n%s", code, logs(), lock, errs)
	}
}
