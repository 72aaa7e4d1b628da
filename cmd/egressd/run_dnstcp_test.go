package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// dnsTCPFlood is the program for the DNS-over-TCP tests: it says "ready",
// waits for a line, opens N connections to the sandbox's resolver and
// holds them all, says "held", waits for a line, then makes a CONNECT
// through the proxy while it still holds them. In "query" mode each
// connection asks one valid question and reads the answer (or the close);
// in "halfsent" mode each declares a 65535-byte message and sends 65000
// bytes of it (so a buffer of the declared size is written, not only
// reserved), and "held" comes once egressd has closed every one.
const dnsTCPFlood = `import socket, struct, subprocess, sys
n, mode, url = int(sys.argv[1]), sys.argv[2], sys.argv[3]
name = b"".join(bytes([len(l)]) + l for l in b"api.allowed.example".split(b".")) + b"\0"
query = bytes.fromhex("abcd01000001000000000000") + name + b"\0\1\0\1"
print("ready", flush=True); sys.stdin.readline()
held, answered, closed = [], 0, 0
for i in range(n):
    s = socket.create_connection(("127.0.0.53", 53))
    held.append(s)
    try:
        if mode == "query":
            s.sendall(struct.pack("!H", len(query)) + query)
            if len(s.recv(2)) == 2:
                answered += 1
            else:
                closed += 1
        else:
            s.sendall(b"\xff\xff" + b"x" * 65000)
    except OSError:
        closed += 1
if mode == "halfsent":  # until egressd has dealt with every one: it closes them
    for s in held:
        s.settimeout(60)
        try:
            while s.recv(65536):
                pass
        except OSError:
            pass
print("held %d answered=%d closed=%d" % (len(held), answered, closed), flush=True); sys.stdin.readline()
r = subprocess.run(["curl", "-sS", "-m", "10", "--cacert", "ca.pem", url], capture_output=True, text=True)
print("curl rc=%d %s" % (r.returncode, r.stdout), flush=True)
`

// dnsTCPFloodRun is egressd run with dnsTCPFlood as its program, driven line by
// line.
type dnsTCPFloodRun struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	errb  lockedBuffer
	lines []string
}

func startDNSTCPFlood(t *testing.T, e *sandboxEnv, n int, mode string) *dnsTCPFloodRun {
	if err := os.WriteFile(filepath.Join(e.dir, "flood.py"), []byte(dnsTCPFlood), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &dnsTCPFloodRun{t: t, cmd: e.command(`exec /usr/bin/python3 flood.py ` + strconv.Itoa(n) + ` ` + mode + ` ` + e.url("api.allowed.example"))}
	r.cmd.Stderr = &r.errb
	in, err := r.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.in, r.out = in, bufio.NewReader(out)
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cmd.Process.Kill(); r.cmd.Wait() })
	return r
}

// next reads the program's next line, which must start with prefix.
func (r *dnsTCPFloodRun) next(prefix string) string {
	line, err := r.out.ReadString('\n')
	r.lines = append(r.lines, line)
	if err != nil || !strings.HasPrefix(line, prefix) {
		r.t.Fatalf("want a line starting %q; stdout so far %q (%v)\nstderr:\n%s", prefix, r.lines, err, r.errb.String())
	}
	return line
}

func (r *dnsTCPFloodRun) proceed() {
	if _, err := io.WriteString(r.in, "go\n"); err != nil {
		r.t.Fatal(err)
	}
}

func (r *dnsTCPFloodRun) finish() {
	r.in.Close()
	if err := r.cmd.Wait(); err != nil {
		r.t.Fatalf("egressd: %v\nstdout %q\nstderr:\n%s", err, r.lines, r.errb.String())
	}
}

func openFDs(t *testing.T, pid int) int {
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// procKB is a field of /proc/PID/status, in kB.
func procKB(t *testing.T, pid int, field string) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + field + `:\s+(\d+) kB`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("no %s in /proc/%d/status", field, pid)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// dnsRefusals counts the DNS connections the audit log says egressd closed
// with msg, on their own lines or folded into summaries.
func dnsRefusals(e *sandboxEnv, msg string) int64 {
	n := int64(0)
	for _, r := range e.auditRecords() {
		if r.Suppressed == 0 && strings.HasPrefix(r.Msg, msg) {
			n++
		}
		for _, f := range r.Folded {
			if strings.HasPrefix(f.Target, msg) {
				n += f.Count
			}
		}
	}
	return n
}

// TestRunDNSOverTCPConnectionFloodCannotExhaustTheSupervisor: the
// sandbox's DNS over TCP is served by the supervisor, and had no
// connection cap: a program holding connections to 127.0.0.53:53 drove the
// supervisor to its descriptor limit, and the proxy stopped answering. The
// program holds 300 connections, each after one answered question (more
// than four times the cap of 64); the supervisor's descriptors grow by at
// most the cap, the refusals are audited, and a CONNECT through the proxy
// still works.
func TestRunDNSOverTCPConnectionFloodCannotExhaustTheSupervisor(t *testing.T) {
	e := newSandboxEnv(t)
	const conns, capacity = 300, 64
	r := startDNSTCPFlood(t, e, conns, "query")
	r.next("ready")
	before := openFDs(t, r.cmd.Process.Pid)
	r.proceed()
	held := r.next("held ")
	during := openFDs(t, r.cmd.Process.Pid)
	r.proceed()
	if line := r.next("curl "); !strings.Contains(line, "rc=0 hello from api.allowed.example") {
		t.Fatalf("CONNECT while the program holds %d DNS connections: %q", conns, line)
	}
	r.finish()
	m := regexp.MustCompile(`answered=(\d+) closed=(\d+)`).FindStringSubmatch(held)
	answered, _ := strconv.Atoi(m[1])
	closed, _ := strconv.Atoi(m[2])
	if answered == 0 || closed == 0 || during > before+capacity+8 {
		t.Fatalf("%s: the supervisor went from %d to %d descriptors (cap %d)", strings.TrimSpace(held), before, during, capacity)
	}
	if n := dnsRefusals(e, "DNS connection closed at accept"); n == 0 {
		t.Fatalf("no refusal at accept audited; the program saw %d closed:\n%s", closed, e.auditLog())
	}
	t.Logf("%s; supervisor descriptors %d -> %d", strings.TrimSpace(held), before, during)
}

// TestRunHalfSentDNSMessagesCannotBalloonTheSupervisor: over TCP a DNS
// message starts with its 16-bit length, and miekg/dns's server allocated
// the length a client declared before reading any of it: connections that
// each declared 65535 bytes and sent a trickle took the supervisor to ~2 GB
// of RSS. 900 connections each declare 65535 bytes and send 65000 of them
// (900 × 64 KB is 56 MB unbounded); the supervisor's peak RSS grows by less than 16 MB,
// each message is refused for its size, and the proxy still serves.
func TestRunHalfSentDNSMessagesCannotBalloonTheSupervisor(t *testing.T) {
	e := newSandboxEnv(t)
	const conns, boundKB = 900, 16 << 10
	r := startDNSTCPFlood(t, e, conns, "halfsent")
	r.next("ready")
	pid := r.cmd.Process.Pid
	rss := procKB(t, pid, "VmRSS")
	r.proceed()
	held := r.next("held ")
	peak := procKB(t, pid, "VmHWM")
	r.proceed()
	if line := r.next("curl "); !strings.Contains(line, "rc=0 hello from api.allowed.example") {
		t.Fatalf("CONNECT after the flood: %q", line)
	}
	r.finish()
	if peak-rss > boundKB {
		t.Fatalf("%s: supervisor RSS %d kB before, peak %d kB during (bound: +%d kB)", strings.TrimSpace(held), rss, peak, boundKB)
	}
	if n := dnsRefusals(e, "DNS connection closed: it declared a message over 4096 bytes"); n == 0 {
		t.Fatalf("no oversized message audited:\n%s", e.auditLog())
	}
	t.Logf("supervisor RSS %d kB before, peak %d kB (+%d kB) with %d connections declaring 65535 bytes", rss, peak, peak-rss, conns)
}
