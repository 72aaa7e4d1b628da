package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRunChildCannotLeaseALaunchersFileToSeeItOpened: a normal user's
// sandbox maps the launcher's uid to its root, so it owns the launcher's
// files bound read-only (the integration folder, a program bound alone),
// and fcntl(F_SETLEASE) on one made every later open of it on the host
// signal the child (who opened it, and when) and wait for the child to let
// go, up to lease-break-time (45 s): an activity sensor and a stall of the
// host. The child must be refused the lease; the test opens the file on
// the host once the child is ready.
func TestRunChildCannotLeaseALaunchersFileToSeeItOpened(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root to run egressd as another user")
		}
		t.Skip("needs root to run egressd as another user")
	}
	e := newSandboxEnv(t)
	const uid, gid = 64993, 64993
	bin := e.binaryForUser(uid, gid)
	cmd := e.command(`exec /usr/bin/python3 -c '
import fcntl, os, signal
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGIO])
fd = os.open("ca.pem", os.O_RDONLY)
try:
    fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
except OSError as e:
    print("F_SETLEASE: " + e.strerror, flush=True); print("ready", flush=True); raise SystemExit
print("ready", flush=True)
signal.sigwait([signal.SIGIO])
print("the lease told the child of an open on the host", flush=True)
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
'`)
	cmd.Path, cmd.Args[0] = bin, bin
	cmd.Env = append(cmd.Env, "HOME="+e.state)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errs strings.Builder
	cmd.Stderr = &errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	var said []string
	for lines.Scan() && lines.Text() != "ready" {
		said = append(said, lines.Text())
	}
	if f, err := os.Open(filepath.Join(e.dir, "ca.pem")); err == nil { // blocks while a lease holds it
		f.Close()
	}
	for lines.Scan() {
		said = append(said, lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("egressd: %v, stderr %s", err, errs.String())
	}
	if got := strings.Join(said, "\n"); got != "F_SETLEASE: Invalid argument" {
		t.Fatalf("the child said:\n%s\nwant it refused the lease (EINVAL)", got)
	}
}
