package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The kernel counts pending signals, inotify and fanotify objects per user
// (ucounts), charged to every user namespace up the chain: without bounds
// of the sandbox's own, a child takes its launcher's host-wide quota. Each
// test here lets the child try a few times its bound, far below the
// host's, and proves the bound holds.

// launcherSigQ is the host's count of pending signals charged to this
// test's uid: the kernel charges a sandbox's signals to the uid that
// created its user namespace (root, as root, whatever uid the sandbox's
// root maps to), and SigQ in the status of any process of that uid shows
// the count.
func launcherSigQ(t *testing.T) int {
	status, err := os.ReadFile("/proc/self/status")
	m := regexp.MustCompile(`SigQ:\s+(\d+)/`).FindSubmatch(status)
	if err != nil || m == nil {
		t.Fatalf("SigQ: %v", err)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestRunRealtimeSignalFloodStopsAtTheSandboxsBound: a child that blocked
// the realtime signals and queued them to itself took its launcher's whole
// pending-signal quota (about 96,000 here): every process of that uid on
// the host got EAGAIN from timer_create. The child queues up to 4,096; the
// sandbox's RLIMIT_SIGPENDING (1,024) must stop it, and the host's count
// for the uid must rise by no more.
func TestRunRealtimeSignalFloodStopsAtTheSandboxsBound(t *testing.T) {
	e := newSandboxEnv(t)
	before := launcherSigQ(t)
	cmd := e.command(`exec /usr/bin/python3 -c '
import signal, sys, threading
sigs = list(range(signal.SIGRTMIN, signal.SIGRTMAX + 1))
signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
n, err = 0, "none"
while n < 4096:
    try: signal.pthread_kill(threading.get_ident(), sigs[n % len(sigs)])
    except OSError as e: err = e.strerror; break
    n += 1
print("queued=%d err=%s" % (n, err), flush=True)
sys.stdin.readline()
'`)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatalf("no report from the child: %v", lines.Err())
	}
	report := lines.Text()
	during := launcherSigQ(t) // the child holds what it queued until it reads a line
	stdin.Write([]byte("done\n"))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("egressd: %v", err)
	}
	if report != "queued=1024 err=Resource temporarily unavailable" {
		t.Errorf("child: %q, want it stopped at 1024", report)
	}
	if log := e.auditLog(); !strings.Contains(log, "pending signals 1024, inotify 16 instances and 8192 watches, fanotify 8 groups and 8192 marks, TCP buffers 256 KiB") {
		t.Errorf("the audit log's limits event does not state the kernel-object bounds:\n%s", log)
	}
	if during-before > 1024+64 { // 64: room for another process of this uid that signals meanwhile
		t.Errorf("the host's pending-signal count for uid %d rose from %d to %d: more than the sandbox's bound", os.Geteuid(), before, during)
	}
}

// TestRunStartsWhileTheLaunchersSignalQuotaIsStarved: while the launcher's
// uid had no pending-signal quota left, a second run never started its
// program: the init's Landlock step signalled each of its threads (a
// realtime signal, refused with EAGAIN) and spun forever waiting for them.
// The test starves the quota without filling it: the launcher's soft
// RLIMIT_SIGPENDING is 0, which the kernel makes the new user namespace's
// ceiling on the uid's host-wide count, so every realtime signal to the
// sandbox's tasks is refused. The hard limit stays, so the sandbox can
// still set its own bound.
func TestRunStartsWhileTheLaunchersSignalQuotaIsStarved(t *testing.T) {
	e := newSandboxEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second) // a bound on failure, not a synchronisation
	defer cancel()
	inner := e.command(`echo program ran`)
	cmd := exec.CommandContext(ctx, "prlimit", append([]string{"--sigpending=0:", "--"}, inner.Args...)...)
	cmd.Env = inner.Env
	out, errs, code := runCmd(t, cmd)
	if code != 0 || out != "program ran\n" {
		t.Fatalf("exit %d (context: %v), stdout %q, stderr %q", code, ctx.Err(), out, errs)
	}
}

// TestRunInotifyAndFanotifyStopAtTheSandboxsBound: the child took its
// launcher's host-wide inotify instances and watches and fanotify groups
// (user.max_inotify_instances and friends count per uid up the namespace
// chain): every process of that uid, and every other integration, got
// EMFILE from inotify_init1. The sandbox's user namespace has its own,
// small, bounds; the child tries past each, and stays far below the host's.
// Seccomp now refuses inotify and fanotify outright (see
// TestRunChildCannotWatchHostActivityInBoundFolders); the bounds stay as a
// second layer, so this test turns the filter off to reach them.
func TestRunInotifyAndFanotifyStopAtTheSandboxsBound(t *testing.T) {
	e := newSandboxEnv(t)
	cmd := e.command(`exec /usr/bin/python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def upto(cap, f):
    n = 0
    while n < cap and f(n) >= 0: n += 1
    return "%d(%s)" % (n, os.strerror(ctypes.get_errno()) if n < cap else "cap")
os.makedirs("/tmp/w")
for i in range(9000): open("/tmp/w/%d" % i, "w").close()
ino = libc.inotify_init1(0)
fan = libc.fanotify_init(0x200, 0)
print("inotify_watches=" + upto(9000, lambda i: libc.inotify_add_watch(ino, b"/tmp/w/%d" % i, 2)))
print("fanotify_marks=" + upto(9000, lambda i: libc.fanotify_mark(fan, 1, 2, -100, b"/tmp/w/%d" % i)))
print("inotify_instances=" + upto(100, lambda i: libc.inotify_init1(0)))
print("fanotify_groups=" + upto(40, lambda i: libc.fanotify_init(0x200, 0)))
'`)
	cmd = exec.Command(hookedBinary(t), cmd.Args[1:]...)
	cmd.Env = append(e.command("").Env, "EGRESSD_TESTHOOK_LAYERS_OFF=seccomp")
	out, errs, code := runCmd(t, cmd)
	want := "inotify_watches=8192(No space left on device)\nfanotify_marks=8192(No space left on device)\n" +
		"inotify_instances=15(Too many open files)\nfanotify_groups=7(Too many open files)\n"
	if code != 0 || out != want {
		t.Fatalf("exit %d\nstdout %q\nwant   %q\nstderr %s", code, out, want, errs)
	}
}

// TestRunStalledSetupEndsWithAClearError: a setup that stalls (as the
// init's did while the launcher's signal quota was starved) kept egressd
// waiting for ever with nothing said. The supervisor's setup timer kills
// the init and says why. The test binary's init stalls on purpose; the
// timer is shortened to 2 s.
func TestRunStalledSetupEndsWithAClearError(t *testing.T) {
	e := newSandboxEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second) // a bound on failure, not a synchronisation
	defer cancel()
	inner := e.command(`echo program ran`)
	cmd := exec.CommandContext(ctx, hookedBinary(t), inner.Args[1:]...)
	cmd.Env = append(inner.Env, "EGRESSD_TESTHOOK_LAYERS_OFF=setup", "EGRESSD_TESTHOOK_SETUP_TIMEOUT=2s")
	out, errs, code := runCmd(t, cmd)
	if code == 0 || code == -1 || out != "" || !strings.Contains(errs, "sandbox setup did not finish within 2s, so egressd stopped it") {
		t.Fatalf("exit %d (context: %v), stdout %q, stderr %q", code, ctx.Err(), out, errs)
	}
}

// TestRunUnreadLoopbackConnectionsHoldLittleHostTCPMemory: socket buffers
// in the sandbox's own network namespace are charged to the host's one
// tcp_mem pool; 131 unread loopback connections held 503 MB of it, and
// about 590 would have made every TCP socket on the host fail. The
// sandbox's namespace caps each socket's buffers (tcp_rmem, tcp_wmem: per
// namespace). The child fills 8 unread connections and reports the bytes
// queued in each (the sender's unsent plus the receiver's unread), which
// the bounds cap at 512 KiB; the kernel's defaults allow 6 MB and 4 MB,
// and SO_RCVBUF/SO_SNDBUF (which seccomp makes do nothing) twice the
// host's net.core.rmem_max and wmem_max.
func TestRunUnreadLoopbackConnectionsHoldLittleHostTCPMemory(t *testing.T) {
	e := newSandboxEnv(t)
	out, errs, code := e.run(`cat /proc/sys/net/ipv4/tcp_rmem /proc/sys/net/ipv4/tcp_wmem; exec /usr/bin/python3 -c '
import fcntl, socket, struct, termios
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(16)
worst, keep = 0, []
for i in range(8):
    c = socket.socket()
    if i % 2: c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 30)
    c.connect(srv.getsockname()); a, _ = srv.accept(); keep += [c, a]; c.setblocking(False)
    if i % 2: a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 30)
    try:
        while True: c.send(b"x" * 65536)
    except BlockingIOError: pass
    q = lambda s, op: struct.unpack("i", fcntl.ioctl(s, op, b"\0" * 4))[0]
    worst = max(worst, q(c, termios.TIOCOUTQ) + q(a, termios.FIONREAD))
print("worst connection holds %d KiB" % (worst >> 10))
'`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "4096 87380 262144" ||
		strings.Join(strings.Fields(lines[1]), " ") != "4096 16384 262144" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	var kib int
	if _, err := fmt.Sscanf(lines[2], "worst connection holds %d KiB", &kib); err != nil || kib > 512 || kib < 64 {
		t.Fatalf("%q: want each connection to hold at most 512 KiB (and to have filled)", lines[2])
	}
}
