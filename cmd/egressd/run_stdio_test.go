package main

import (
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The launcher's stdio is not always a pipe or a terminal: inetd, systemd's
// Accept=yes and ncat --exec hand the program a TCP connection, Node's
// child_process.spawn a unix socketpair. Such a socket lives in the host's
// network namespace, so the program gets a pipe and egressd relays.

// probeCommand is egressd run of the probe with args, straight (no shell
// between: the probe gets egressd's descriptors).
func (e *sandboxEnv) probeCommand(args ...string) *exec.Cmd {
	e.t.Helper()
	data, err := os.ReadFile(probeBinary(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "probe"), data, 0o755); err != nil {
		e.t.Fatal(err)
	}
	return exec.Command(egressdBinary(e.t), append([]string{"run", "--state", e.state, "--audit-log", e.audit,
		"--resolver", e.dns.Addr, e.dir, "--", "./probe"}, args...)...)
}

// hostService is a host-only TCP service; reached says whether anything
// connected to it.
func hostService(t *testing.T) (addr string, reached func() bool) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), func() bool {
		// A connect that succeeded is in the accept queue by the time it
		// returned: one non-blocking accept(2) takes it without waiting.
		rc, err := ln.(*net.TCPListener).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		got := false
		rc.Control(func(fd uintptr) {
			if nfd, _, err := unix.Accept4(int(fd), unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK); err == nil {
				unix.Close(nfd)
				got = true
			}
		})
		return got
	}
}

// TestRunHostTCPSocketAsStdioCannotBeReconnected: egressd run is given an
// accepted TCP connection as stdin and stdout, as inetd does. The program
// disconnects fd 0 (connect AF_UNSPEC) and connects it to a host-only
// service: that would pass the proxy, the TUN and the audit log. It must
// see a pipe, fail both connects, reach nothing, and still talk to its
// peer both ways. The peer never closes its side, and the launcher keeps a
// copy of the socket: egressd still exits when the program does, and the
// peer sees EOF once the program's output ends.
func TestRunHostTCPSocketAsStdioCannotBeReconnected(t *testing.T) {
	e := newSandboxEnv(t)
	service, reached := hostService(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	accepted, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	sock, err := accepted.(*net.TCPConn).File()
	accepted.Close()
	if err != nil {
		t.Fatal(err)
	}
	cmd := e.probeCommand("stdio", service)
	cmd.Stdin, cmd.Stdout = sock, sock
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer sock.Close() // kept, as a launcher may: the peer's EOF must come from egressd's shutdown
	if _, err := peer.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	peer.SetReadDeadline(time.Now().Add(2 * time.Minute)) // a bound on a hang, not a synchronisation
	got, readErr := io.ReadAll(peer)
	runErr := cmd.Wait()
	if reached() {
		t.Fatalf("the program reached the host-only service %s through its stdin socket\nstderr:\n%s", service, stderr.String())
	}
	report := string(got)
	for _, want := range []string{`read "ping\n"`, "fd0: pipe", "fd1: pipe", "SIOCGIFCONF fd0: ENOTTY", "connect fd0 AF_UNSPEC: ENOTSOCK",
		"connect fd0 " + service + ": socket operation on non-socket"} {
		if !strings.Contains(report, want) {
			t.Fatalf("the peer read %q (read: %v), missing %q; egressd: %v\nstderr:\n%s", report, readErr, want, runErr, stderr.String())
		}
	}
	if readErr != nil || runErr != nil {
		t.Fatalf("the peer's read ended with %v, egressd with %v\nstderr:\n%s", readErr, runErr, stderr.String())
	}
}

// TestRunSocketpairAsStdioShowsNoHostInterfaces: Node's spawn hands the
// program unix socketpairs made in the host's network namespace; an
// ioctl on one (SIOCGIFCONF) lists the host's interfaces and addresses.
// On a pipe the kernel answers ENOTTY.
// The program must get pipes, and the data must still flow both ways.
func TestRunSocketpairAsStdioShowsNoHostInterfaces(t *testing.T) {
	e := newSandboxEnv(t)
	service, reached := hostService(t)
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.SetNonblock(pair[0], true) // the launcher's end: pollable, so it takes a deadline
	launcher, child := os.NewFile(uintptr(pair[0]), "launcher"), os.NewFile(uintptr(pair[1]), "child")
	defer launcher.Close()
	cmd := e.probeCommand("stdio", service)
	cmd.Stdin, cmd.Stdout = child, child
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.Close()
	if _, err := launcher.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	launcher.SetReadDeadline(time.Now().Add(2 * time.Minute)) // a bound on a hang, not a synchronisation
	got, readErr := io.ReadAll(launcher)                      // EOF: every holder of the child's end is gone
	runErr := cmd.Wait()
	if reached() {
		t.Fatalf("the program reached the host-only service %s\nstderr:\n%s", service, stderr.String())
	}
	for _, want := range []string{`read "ping\n"`, "fd0: pipe", "fd1: pipe", "SIOCGIFCONF fd0: ENOTTY"} {
		if !strings.Contains(string(got), want) {
			t.Fatalf("the launcher read %q (read: %v), missing %q; egressd: %v\nstderr:\n%s", got, readErr, want, runErr, stderr.String())
		}
	}
	if readErr != nil || runErr != nil {
		t.Fatalf("read: %v, egressd: %v\nstderr:\n%s", readErr, runErr, stderr.String())
	}
}

// TestRunSerialLineSettersAreRefused: a program handed a host serial line
// could change its speed flags and custom divisor (TIOCSSERIAL), its RS485
// or ISO7816 mode, or lock its modes (TIOCSLCKTRMIOS), and egressd does not
// restore them. Sent to a pipe, each must get the filter's EPERM, not the
// kernel's ENOTTY, which shows the call never reached a driver.
func TestRunSerialLineSettersAreRefused(t *testing.T) {
	e := newSandboxEnv(t)
	out := e.runProbe(egressdBinary(t), "ioctls")
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "ioctl(") {
			continue
		}
		n++
		if !strings.HasSuffix(line, ": EPERM") {
			t.Errorf("not refused by the filter: %s", line)
		}
	}
	if n != 13 || !strings.Contains(out, "rc=0") {
		t.Fatalf("the probe reported %d ioctls:\n%s", n, out)
	}
}
