package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/egressd/egressd/proxy/proxytest"
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
	if n != 15 || !strings.Contains(out, "rc=0") {
		t.Fatalf("the probe reported %d ioctls:\n%s", n, out)
	}
}

// nodeLauncher sends each request after the answer to the one before over
// the socketpairs Node's spawn makes, then ends stdin and prints the
// answers and egressd's exit status once stdout closed.
const nodeLauncher = `
import { spawn } from "node:child_process";
const [egressd, ...args] = process.argv.slice(2);
const p = spawn(egressd, args, { stdio: ["pipe", "pipe", "inherit"] });
const reqs = [
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}',
  '{"jsonrpc":"2.0","id":2,"method":"tools/list"}',
];
const got = [];
let buf = "";
const next = () => (got.length < reqs.length ? p.stdin.write(reqs[got.length] + "\n") : p.stdin.end());
p.stdout.on("data", (d) => {
  buf += d;
  for (let i; (i = buf.indexOf("\n")) >= 0; buf = buf.slice(i + 1)) {
    got.push(buf.slice(0, i));
    next();
  }
});
p.on("close", (code) => console.log(JSON.stringify({ code, got })));
next();
`

// TestRunMCPOverNodeSocketpairsStillWorks: an MCP host in Node spawns
// egressd run with stdio "pipe" (socketpairs, now relayed): each answer
// comes back before the next request goes, and ending stdin ends the run.
func TestRunMCPOverNodeSocketpairsStillWorks(t *testing.T) {
	requireSandbox(t)
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is required in CI")
		}
		t.Skip("node not installed")
	}
	script := filepath.Join(t.TempDir(), "host.mjs")
	if err := os.WriteFile(script, []byte(nodeLauncher), 0o644); err != nil {
		t.Fatal(err)
	}
	dns := proxytest.StartDNS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound on a hang
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, egressdBinary(t), "run", "--state", t.TempDir(), "--resolver", dns.Addr,
		"../../configs/examples/coffee-tracker")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var r struct {
		Code int
		Got  []string
	}
	if err != nil || json.Unmarshal(out, &r) != nil {
		t.Fatalf("%v: %s\n%s", err, out, stderr.String())
	}
	if r.Code != 0 || len(r.Got) != 2 || !strings.Contains(r.Got[0], `"serverInfo":{"name":"coffee-tracker"`) || !strings.Contains(r.Got[1], `"name":"coffee_stats"`) {
		t.Fatalf("egressd exit %d, answers %q\n%s", r.Code, r.Got, stderr.String())
	}
}

// TestRunPeerThatStopsReadingDoesNotHoldEgressdPastTheGrace: stdout is a
// socket whose peer stopped reading, so egressd's relay is stuck writing
// the program's last output. SIGTERM ends the program; egressd must then
// exit within the stop grace rather than wait on the peer for ever (before
// the relay, the program itself was the one stuck, and died of the signal).
func TestRunPeerThatStopsReadingDoesNotHoldEgressdPastTheGrace(t *testing.T) {
	e := newSandboxEnv(t)
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.SetsockoptInt(pair[1], unix.SOL_SOCKET, unix.SO_SNDBUF, 4096) // full after a few KiB
	peer, child := os.NewFile(uintptr(pair[0]), "peer"), os.NewFile(uintptr(pair[1]), "child")
	defer peer.Close() // never read
	defer child.Close()
	cmd := e.configured("timeouts:\n  stop_grace: 200ms\n", "exec head -c 20000000 /dev/zero")
	cmd.Stdout = child
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// The socket's send queue fills: the program runs (egressd forwards
	// signals from before that) and the relay is stuck on the peer.
	sndbuf, _ := unix.GetsockoptInt(pair[1], unix.SOL_SOCKET, unix.SO_SNDBUF)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if q, err := unix.IoctlGetInt(pair[1], unix.SIOCOUTQ); err == nil && q >= sndbuf/2 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the send queue never filled (%d of %d, %v)\n%s", q, sndbuf, err, stderr.String())
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(syscall.SIGTERM) {
			t.Fatalf("egressd: %v, want exit 143\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute): // a bound on the hang this test is about
		t.Fatalf("egressd still waits on a peer that stopped reading, a minute after SIGTERM\n%s", stderr.String())
	}
}

// TestRunProgramHandedAPTYMasterCannotSignalTheHostsJob: a pty master is a
// terminal, so it reaches the program as it is. TIOCSIG on it signals the
// foreground job of its slave, a host process, with no permission check.
func TestRunProgramHandedAPTYMasterCannotSignalTheHostsJob(t *testing.T) {
	e := newSandboxEnv(t)
	master, slave := openPTY(t)
	defer master.Close()
	victim := exec.Command("sleep", "1000")
	victim.Stdin, victim.Stdout, victim.Stderr = slave, slave, slave
	victim.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0} // the slave's foreground job
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	defer victim.Process.Kill()
	cmd := e.probeCommand("tiocsig")
	cmd.Stdin = master
	out, err := cmd.CombinedOutput()
	victim.Process.Signal(syscall.SIGTERM)
	werr := victim.Wait()
	ws, _ := victim.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("the host's job on the pty ended with %v (%v), not the test's SIGTERM\negressd: %v\n%s", ws, werr, err, out)
	}
	if err != nil || !strings.Contains(string(out), "TIOCSIG SIGINT: EPERM") {
		t.Fatalf("egressd: %v\n%s", err, out)
	}
}

// TestRunNamedFIFOAsStdinIsRelayed is issue 12's sixth attacker, finding
// 2: a named FIFO is a pipe, so it was passed as it is; it is also a file
// of the host's, which a normal user's sandbox (running as that user, its
// owner) could fchmod setuid and world-writable. Only an anonymous pipe
// passes now: the program's stdin is egressd's own pipe, and the data
// still flows.
func TestRunNamedFIFOAsStdinIsRelayed(t *testing.T) {
	e := newSandboxEnv(t)
	fifo := filepath.Join(t.TempDir(), "in.fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(fifo, os.O_RDWR, 0) // RDWR: neither end blocks opening
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	io.WriteString(f, "through the fifo\n")
	cmd := e.command(`read line; echo "got:$line"; readlink /proc/self/fd/0; stat -L -c '%i' /proc/self/fd/0`)
	cmd.Stdin = f
	out, err := cmd.Output()
	var st unix.Stat_t
	unix.Stat(fifo, &st)
	if err != nil || !strings.Contains(string(out), "got:through the fifo") || !strings.Contains(string(out), "pipe:[") ||
		strings.Contains(string(out), "\n"+strconv.FormatUint(st.Ino, 10)+"\n") {
		t.Fatalf("%v: the program held the host's FIFO, or its data did not flow:\n%s", err, out)
	}
}
