package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunProgramCannotRewriteTheAppendOnlyStdoutFile: egressd run's stdout
// is ">> host.log", a regular file in append mode holding another
// service's earlier lines. The program clears O_APPEND with fcntl, seeks to
// 0, writes a forged line and truncates the file there. The earlier lines
// must survive; the program's output is appended after them.
func TestRunProgramCannotRewriteTheAppendOnlyStdoutFile(t *testing.T) {
	e := newSandboxEnv(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("/usr/bin/python3 is required")
		}
		t.Skip("/usr/bin/python3 is required")
	}
	const earlier = "line 1: earlier output of another service\nline 2: audit-relevant line\n"
	logPath := filepath.Join(t.TempDir(), "host.log")
	if err := os.WriteFile(logPath, []byte(earlier), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(egressdBinary(t), "run", "--state", e.state, "--audit-log", e.audit, "--resolver", e.dns.Addr, e.dir, "--",
		"/usr/bin/python3", "-c", `import os, fcntl
def attempt(what, f):
    try:
        f()
    except OSError as e:
        os.write(2, ("%s: %s\n" % (what, e)).encode())
attempt("fcntl", lambda: fcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) & ~os.O_APPEND))
attempt("lseek", lambda: os.lseek(1, 0, os.SEEK_SET))
os.write(1, b"FORGED\n")
attempt("ftruncate", lambda: os.ftruncate(1, 7))
os.write(1, b"program line\n")`)
	cmd.Stdout = out
	stderr, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	runErr := cmd.Run()
	got, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	errText, _ := os.ReadFile(stderr.Name())
	if !strings.HasPrefix(string(got), earlier) {
		t.Fatalf("the program rewrote the host file's earlier content (run: %v):\n%q\nstderr: %s", runErr, got, errText)
	}
	if !strings.Contains(string(got[len(earlier):]), "program line") {
		t.Fatalf("the program's output was not appended (run: %v):\n%q\nstderr: %s", runErr, got, errText)
	}
}
