package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunPythonThroughAPyenvShimSaysWhy runs "egressd run DIR -- python3"
// where python3 on PATH is a pyenv shim under the home folder (a copy of
// what pyenv writes). The sandbox does not show the home folder, so the
// shim would die with exit 127 on the manager it hands over to; egressd
// refuses before starting and says why and what to give instead.
func TestRunPythonThroughAPyenvShimSaysWhy(t *testing.T) {
	e := newSandboxEnv(t)
	home := t.TempDir()
	os.Chmod(home, 0o755)
	root := filepath.Join(home, ".pyenv")
	shims, libexec := filepath.Join(root, "shims"), filepath.Join(root, "libexec")
	os.MkdirAll(shims, 0o755)
	os.MkdirAll(libexec, 0o755)
	// The manager runs the system's interpreter, so outside the sandbox
	// the shim works.
	os.WriteFile(filepath.Join(libexec, "pyenv"), []byte("#!/bin/sh\nshift; prog=$1; shift; exec /bin/sh -c 'echo interpreter ran'\n"), 0o755)
	os.WriteFile(filepath.Join(shims, "python3"), []byte(`#!/usr/bin/env bash
set -e
program="${0##*/}"
export PYENV_ROOT="`+root+`"
exec "`+libexec+`/pyenv" exec "$program" "$@"
`), 0o755)
	env := append(os.Environ(), "HOME="+home, "PATH="+shims+":/usr/local/bin:/usr/bin:/bin")
	outside := exec.Command("python3", "-c", "pass")
	outside.Env = env
	outside.Path = filepath.Join(shims, "python3")
	if out, err := outside.CombinedOutput(); err != nil || string(out) != "interpreter ran\n" {
		t.Fatalf("the shim does not work outside the sandbox: %v %q", err, out)
	}

	cmd := exec.Command(egressdBinary(t), "run", "--state", e.state, "--audit-log", e.audit, "--resolver", e.dns.Addr, e.dir, "--", "python3", "-c", "pass")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	want := "egressd run: python3 resolves to " + filepath.Join(shims, "python3") + ", a shim under the home folder (" + home +
		"), which the sandbox does not show; give the interpreter's real path, "
	if code != exitFail || !strings.Contains(string(out), want) {
		t.Fatalf("exit %d (want %d), want %q in:\n%s", code, exitFail, want, out)
	}
	if strings.Contains(string(out), "interpreter ran") {
		t.Fatalf("the program ran:\n%s", out)
	}
}
