package main

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRunProgramReopeningItsStderrPipeTakesNothingFromTheLaunchersPipe:
// a pipe was passed to the program as it was, and a normal user's program
// opened /proc/self/fd/2 read-only: it then held a read end of the
// launcher's stderr pipe, and took the lines another job wrote to it before
// the pipe's real reader (a log collector, the MCP host) saw them. Now
// stdio is always relayed: what the program reopens is egressd's own pipe,
// and every line the other job writes reaches the launcher's reader.
func TestRunProgramReopeningItsStderrPipeTakesNothingFromTheLaunchersPipe(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root to run egressd as another user")
		}
		t.Skip("needs root to run egressd as another user")
	}
	e := newSandboxEnv(t)
	const uid, gid = 64990, 64990
	bin := filepath.Join(t.TempDir(), "egressd")
	copyExecutable(t, egressdBinary(t), bin)
	for _, d := range []string{filepath.Dir(bin), filepath.Dir(e.dir), filepath.Dir(e.state), filepath.Dir(e.audit)} {
		os.Chmod(d, 0o755)
	}
	for _, d := range []string{e.dir, e.state, filepath.Dir(e.audit)} {
		filepath.Walk(d, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, uid, gid) })
	}
	// The launcher's stderr: a pipe of the launching user's, as a shell
	// running as that user would make it.
	collector, shared, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer collector.Close()
	defer shared.Close()
	for _, f := range []*os.File{collector, shared} {
		if err := f.Chown(uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	cmd := e.command(`exec /usr/bin/python3 -c '
import os, sys
try:
    fd = os.open("/proc/self/fd/2", os.O_RDONLY | os.O_NONBLOCK)
except OSError as e:
    fd = None
print("ready", flush=True)
sys.stdin.readline()
got = b""
if fd is not None:
    try: got = os.read(fd, 65536)
    except BlockingIOError: pass
print("took %r" % got, flush=True)
'`)
	cmd.Path, cmd.Args[0] = bin, bin
	cmd.Env = append(cmd.Env, "HOME="+e.state)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	cmd.Stderr = shared
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewReader(stdout)
	if line, err := lines.ReadString('\n'); line != "ready\n" {
		t.Fatalf("want ready, got %q (%v)", line, err)
	}
	io.WriteString(shared, "other-job: token=SECRET-1\n") // another job's line, while the program runs
	io.WriteString(stdin, "go\n")
	rest, _ := io.ReadAll(lines)
	cmd.Wait()
	shared.Close()
	collected, _ := io.ReadAll(collector)
	if strings.Contains(string(rest), "SECRET") || !strings.Contains(string(collected), "other-job: token=SECRET-1") {
		t.Fatalf("the program took the other job's line from the launcher's stderr pipe:\nprogram: %s\ncollector: %s", rest, collected)
	}
	if !strings.Contains(string(rest), "took b''") {
		t.Fatalf("the program did not run to the end: %s", rest)
	}
}

// TestRunProgramCannotResizeTheLaunchersStdoutPipe: F_SETPIPE_SZ on a
// stdout pipe passed as it was left the launcher's pipe at 4 KiB after
// egressd exited. The program's stdout is egressd's own pipe now.
func TestRunProgramCannotResizeTheLaunchersStdoutPipe(t *testing.T) {
	e := newSandboxEnv(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	before, err := unix.FcntlInt(w.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := e.command(`exec /usr/bin/python3 -c '
import fcntl
print("set", fcntl.fcntl(1, 1031, 4096), flush=True)
'`)
	cmd.Stdout = w
	out := make(chan string)
	go func() { b, _ := io.ReadAll(r); out <- string(b) }()
	runErr := cmd.Run()
	after, _ := unix.FcntlInt(w.Fd(), unix.F_GETPIPE_SZ, 0)
	w.Close()
	printed := <-out
	if runErr != nil || !strings.Contains(printed, "set 4096") {
		t.Fatalf("%v: the program did not resize its stdout: %q", runErr, printed)
	}
	if after != before {
		t.Fatalf("the launcher's stdout pipe holds %d bytes after the run, %d before", after, before)
	}
}
