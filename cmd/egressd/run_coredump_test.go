package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// crashName is the name of the shell copy that crashes: the helper logs the
// crashing program's name (%e), so crashes of other programs on a shared
// machine while the pattern is set are told apart.
const crashName = "egressd-crash"

// pipeCoreHelper points kernel.core_pattern at a helper script the test
// owns for the test's length, and kernel.core_pipe_limit at a non-zero
// value so the kernel waits for the helper before the crashing process is
// reaped: the crash's exit is then the event after which the helper's log
// is complete. Both are restored in Cleanup. It returns the helper's log.
func pipeCoreHelper(t *testing.T) string {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("setting kernel.core_pattern needs root in CI")
		}
		t.Skip("setting kernel.core_pattern needs root")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	log, helper := filepath.Join(dir, "helper.log"), filepath.Join(dir, "core-helper")
	// The helper logs before it reads the core, and keeps the pipe open
	// until it has read it all.
	script := "#!/bin/sh\necho \"$1\" >> " + log + "\nexec cat > /dev/null\n"
	if err := os.WriteFile(helper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, value := range map[string]string{"core_pattern": "|" + helper + " %e", "core_pipe_limit": "16"} {
		file := "/proc/sys/kernel/" + name
		old, err := os.ReadFile(file)
		if err == nil {
			err = os.WriteFile(file, []byte(value), 0o644)
		}
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("kernel.%s: %v", name, err)
			}
			t.Skipf("kernel.%s: %v", name, err)
		}
		t.Cleanup(func() {
			if err := os.WriteFile(file, old, 0o644); err != nil {
				t.Errorf("restoring kernel.%s: %v", name, err)
			}
		})
	}
	return log
}

// helperRuns counts the crashes of crashName the helper was started for.
func helperRuns(t *testing.T, log string) int {
	data, err := os.ReadFile(log)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), crashName+"\n")
}

// TestRunCrashDoesNotStartTheHostsCoreHelper is issue 12's ninth attacker,
// finding 1: with a pipe core_pattern (systemd-coredump, apport) the kernel
// ignores RLIMIT_CORE=0 and starts the host's helper, as root in the host's
// namespaces, with the crashing program's memory. A crash in the sandbox,
// plain or after the program lowered its own core limit to 0, starts no
// helper; the same crash on the host does (the helper works).
func TestRunCrashDoesNotStartTheHostsCoreHelper(t *testing.T) {
	e := newSandboxEnv(t)
	log := pipeCoreHelper(t)
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	crash := filepath.Join(e.dir, crashName)
	if err := os.WriteFile(crash, sh, 0o755); err != nil {
		t.Fatal(err)
	}
	out, errs, code := e.run("./" + crashName + ` -c 'kill -s SEGV $$'; echo plain=$?; ./` + crashName +
		` -c 'ulimit -c 0; kill -s SEGV $$'; echo lowered=$?; ./` + crashName + ` -c 'ulimit -c unlimited; kill -s SEGV $$'; echo raised=$?`)
	if code != 0 || !strings.Contains(out, "plain=139\n") || !strings.Contains(out, "lowered=139\n") || !strings.Contains(out, "raised=139\n") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	inSandbox := helperRuns(t, log)
	if inSandbox != 0 {
		t.Errorf("the host's core helper ran for %d crashes in the sandbox", inSandbox)
	}
	host := exec.Command(crash, "-c", `ulimit -c 0; kill -s SEGV $$`)
	if err := host.Run(); err == nil {
		t.Fatal("the crash on the host exited 0")
	}
	if n := helperRuns(t, log) - inSandbox; n != 1 {
		t.Fatalf("the helper ran %d times for one crash on the host: the test proves nothing", n)
	}
}
