package selftest

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// These tests run single probes in the test process, where no sandbox
// layer exists: each must report OPEN there. The sandboxed battery, with
// one layer switched off at a time, is tested in cmd/egressd.

func startBeacons(t *testing.T) *Beacons {
	t.Helper()
	b, err := StartBeacons(t.TempDir(), Targets{DeniedNames: []string{"denied.egressd-selftest.example"},
		DoHNames: []string{"doh.egressd-selftest.example"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// writeInner is what the inner half prints: some noise of the program's
// own, then its results line.
func writeInner(t *testing.T, in inner) []byte {
	t.Helper()
	var out bytes.Buffer
	out.WriteString("a line the program printed\n")
	if err := writeResults(&out, in); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func find(t *testing.T, rs []Result, name string) Result {
	t.Helper()
	for _, r := range rs {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no %s in %v", name, rs)
	return Result{}
}

func TestJudgeCountsMissingResultsAsOpen(t *testing.T) {
	b := startBeacons(t)
	rs, _ := b.Judge([]byte("a line the program printed\n"), 125)
	if len(rs) != 1 || rs[0].Result != Open {
		t.Fatalf("no results judged %v", rs)
	}
}

// The program dies between writing the first results line and the last: a
// final line cut short does not count, and the sandbox's death is OPEN.
func TestJudgeIgnoresAResultsLineCutShortByDeath(t *testing.T) {
	b := startBeacons(t)
	out := writeInner(t, inner{Probes: []Result{{Name: "udp", Result: Closed}}})
	full := writeInner(t, inner{Probes: []Result{{Name: "udp", Result: Closed}, {Name: "signal-init-sigquit", Result: Closed}}, Done: true})
	out = append(out, full[:len(full)-10]...)
	rs, _ := b.Judge(out, 131)
	if r := find(t, rs, "signal-init-sigquit"); r.Result != Open {
		t.Fatalf("%+v", r)
	}
	if r := find(t, rs, "udp"); r.Result != Closed {
		t.Fatalf("the complete line is judged: %+v", r)
	}
}

// The outer half captures what the program writes to the standard output
// it inherits, as egressd run passes it.
func TestCaptureStdoutKeepsWhatAChildWrote(t *testing.T) {
	b := startBeacons(t)
	if err := b.CaptureStdout(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", "echo from-the-child")
	cmd.Stdout = os.Stdout
	err := cmd.Run()
	out := b.ReturnStdout()
	if err != nil || string(out) != "from-the-child\n" {
		t.Fatalf("%v: %q", err, out)
	}
}

func TestJudgeSandboxThatDiedOnSIGQUITIsOpen(t *testing.T) {
	b := startBeacons(t)
	rs, _ := b.Judge(writeInner(t, inner{Probes: []Result{{Name: "udp", Result: Closed}}}), 131)
	if r := find(t, rs, "signal-init-sigquit"); r.Result != Open {
		t.Fatalf("%+v", r)
	}
	rs, _ = b.Judge(writeInner(t, inner{Probes: []Result{{Name: "signal-init-sigquit", Result: Closed}}, Done: true}), 0)
	if r := find(t, rs, "signal-init-sigquit"); r.Result != Closed {
		t.Fatalf("%+v", r)
	}
}

// A capture that accepts a connection and refuses it is no way out, but
// only egressd's own audit log may say so.
func TestJudgeCallsACapturedConnectionClosedOnlyWithTheAuditLogsWord(t *testing.T) {
	b := startBeacons(t)
	open := inner{Done: true, Probes: []Result{
		{Name: "tcp-ip-literal-443", Result: Open, Detail: "198.51.100.1:443: connected", Reached: []string{"198.51.100.1:443"}},
		{Name: "udp", Result: Open, Detail: "198.51.100.1:443: datagram sent; 198.51.100.2:443: " + leftNote, Reached: []string{"198.51.100.1:443"}},
	}}
	rs, _ := b.Judge(writeInner(t, open), 0)
	if r := find(t, rs, "tcp-ip-literal-443"); r.Result != Open {
		t.Fatalf("without an audited refusal: %+v", r)
	}
	// The proxy's refusal of a CONNECT to the same address says nothing
	// about the direct attempt.
	os.WriteFile(b.Config.AuditLog, []byte(`{"kind":"connect","method":"CONNECT","decision":"deny","host_raw":"\"198.51.100.1:443\""}`+"\n"), 0o600)
	rs, _ = b.Judge(writeInner(t, open), 0)
	if r := find(t, rs, "tcp-ip-literal-443"); r.Result != Open {
		t.Fatalf("with only the proxy's refusal: %+v", r)
	}
	os.WriteFile(b.Config.AuditLog, []byte(`{"kind":"connect","method":"captured","decision":"deny","reason":"ip_literal","host_raw":"\"198.51.100.1:443\""}`+"\n"), 0o600)
	rs, _ = b.Judge(writeInner(t, open), 0)
	if r := find(t, rs, "tcp-ip-literal-443"); r.Result != Closed {
		t.Fatalf("with an audited refusal: %+v", r)
	}
	if r := find(t, rs, "udp"); r.Result != Open {
		t.Fatalf("an attempt nothing refused stays OPEN: %+v", r)
	}
}

func TestBeaconsSeeAProgramThatReachesTheHost(t *testing.T) {
	b := startBeacons(t)
	c := b.Config
	ctx := context.Background()
	for name, addr := range map[string][2]string{
		"host-loopback-service":     {"tcp", c.Loopback},
		"host-unix-socket-path":     {"unix", c.UnixPath},
		"host-unix-socket-abstract": {"unix", "@" + c.UnixAbs},
	} {
		if v, d := beacon(ctx, addr[0], addr[1], c.Nonce); v != Open {
			t.Errorf("%s: %s %s", name, v, d)
		}
	}
	// The outer half's own record makes it OPEN whatever the program said.
	rs, _ := b.Judge(writeInner(t, inner{Done: true, Probes: []Result{{Name: "host-loopback-service", Result: Closed}}}), 0)
	if r := find(t, rs, "host-loopback-service"); r.Result != Open {
		t.Fatalf("%+v", r)
	}
	if v, d := beacon(ctx, "tcp", "127.0.0.1:1", c.Nonce); v != Closed {
		t.Errorf("a refused connection: %s %s", v, d)
	}
}

func TestDNSProbesAreOpenWhenTheUpstreamIsAsked(t *testing.T) {
	b := startBeacons(t)
	c := b.Config
	c.Resolver = b.DNSAddr // what a resolver that forwards everything does
	ctx := context.Background()
	for name, f := range map[string]func(context.Context, *Config) (string, string){
		"dns-denied-name": probeDeniedName, "dns-random-subdomains": probeRandomSubdomains,
	} {
		if v, d := f(ctx, &c); v != Open {
			t.Errorf("%s: %s %s", name, v, d)
		}
	}
	rs, _ := b.Judge(writeInner(t, inner{Done: true, Probes: []Result{
		{Name: "dns-denied-name", Result: Closed}, {Name: "dns-random-subdomains", Result: Closed}}}), 0)
	for _, name := range []string{"dns-denied-name", "dns-random-subdomains"} {
		if r := find(t, rs, name); r.Result != Open || !strings.Contains(r.Detail, c.Nonce) {
			t.Errorf("the beacon's record: %+v", r)
		}
	}
}

// Every direct attempt must be in the audit log as a refusal.
func TestAttemptsAuditedNeedsARefusalForEachDestination(t *testing.T) {
	b := startBeacons(t)
	b.Config.Targets.TCP443 = []string{"198.51.100.1:443"}
	b.Config.Targets.UDP = []string{"198.51.100.2:443"}
	in := writeInner(t, inner{Done: true})
	rs, _ := b.Judge(in, 0)
	if r := find(t, rs, "attempts-audited"); r.Result != Open {
		t.Fatalf("nothing audited: %+v", r)
	}
	os.WriteFile(b.Config.AuditLog, []byte(`{"method":"captured","decision":"deny","host_raw":"\"198.51.100.1:443\""}`+"\n"), 0o600)
	rs, _ = b.Judge(in, 0)
	if r := find(t, rs, "attempts-audited"); r.Result != Open || !strings.Contains(r.Detail, "198.51.100.2:443") {
		t.Fatalf("one of two audited: %+v", r)
	}
	os.WriteFile(b.Config.AuditLog, []byte(`{"method":"captured","decision":"deny","host_raw":"\"198.51.100.1:443\""}`+"\n"+
		`{"method":"udp","decision":"deny","host_raw":"\"198.51.100.2:443\""}`+"\n"), 0o600)
	rs, _ = b.Judge(in, 0)
	if r := find(t, rs, "attempts-audited"); r.Result != Closed {
		t.Fatalf("both audited: %+v", r)
	}
}

// A proxy that tunnels to a DoH server is OPEN; one that answers 403 is
// closed.
func TestDoHThroughProxyJudgesByWhatTheProxyDid(t *testing.T) {
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "dns") }))
	defer origin.Close()
	var allow atomic.Bool
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect || !allow.Load() {
			http.Error(w, "denied", http.StatusForbidden)
			return
		}
		up, err := net.Dial("tcp", origin.Listener.Addr().String())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
		conn, rw, _ := w.(http.Hijacker).Hijack()
		go func() { io.Copy(up, rw); up.Close() }()
		io.Copy(conn, bufio.NewReader(up))
		conn.Close()
	}))
	defer proxy.Close()
	t.Setenv("HTTPS_PROXY", proxy.URL)
	c := &Config{Targets: Targets{DoHNames: []string{"doh.egressd-selftest.example"}, TCP443: []string{"198.51.100.1:443"}}}
	if v, d := probeDoHProxy(context.Background(), c); v != Closed {
		t.Errorf("a refusing proxy: %s %s", v, d)
	}
	if v, d := probeIPThroughProxy(context.Background(), c); v != Closed {
		t.Errorf("a refusing proxy, IP literal: %s %s", v, d)
	}
	allow.Store(true)
	if v, d := probeDoHProxy(context.Background(), c); v != Open {
		t.Errorf("a tunnelling proxy: %s %s", v, d)
	}
	if v, d := probeIPThroughProxy(context.Background(), c); v != Open {
		t.Errorf("a tunnelling proxy, IP literal: %s %s", v, d)
	}
}

func TestEnvironmentProbeSeesTheCanary(t *testing.T) {
	c := &Config{Nonce: "stcanary", CanaryEnv: canaryEnv}
	if v, d := probeEnvSecret(context.Background(), c); v != Closed {
		t.Fatalf("no canary: %s %s", v, d)
	}
	t.Setenv("SOME_TOKEN", "value-stcanary")
	if v, d := probeEnvSecret(context.Background(), c); v != Open {
		t.Fatalf("canary set: %s %s", v, d)
	}
}

func TestNetworkProbesJudgeByWhatHappened(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx := context.Background()
	if v, d, reached := dialAll(ctx, "tcp", []string{ln.Addr().String()}); v != Open || len(reached) != 1 {
		t.Errorf("a connection: %s %s %v", v, d, reached)
	}
	if v, d, _ := dialAll(ctx, "tcp", []string{"127.0.0.1:1"}); v != Closed {
		t.Errorf("a refusal: %s %s", v, d)
	}
	if v, d, _ := sendAll(ctx, []string{"127.0.0.1:9"}, []byte("x")); v != Open {
		t.Errorf("a datagram: %s %s", v, d)
	}
}

func TestReachJudgesByTheKernelsAnswer(t *testing.T) {
	if v, d := reach("getpid", unix.SYS_GETPID, 0, 0, 0); v != Open {
		t.Errorf("getpid: %s %s", v, d)
	}
	if v, d := reach("no such call", 4000, 0, 0, 0); v != Closed {
		t.Errorf("ENOSYS: %s %s", v, d)
	}
	if v, d := probeTIOCSTI(unix.TIOCSTI); v != Open || !strings.Contains(d, "inappropriate ioctl") {
		t.Errorf("TIOCSTI on a pipe, unfiltered: %s %s", v, d)
	}
	if v, d := probeIoctlOnPipe("ioctl(TIOCSCTTY)", unix.TIOCSCTTY, 0); v != Open || !strings.Contains(d, "inappropriate ioctl") {
		t.Errorf("TIOCSCTTY on a pipe, unfiltered: %s %s", v, d)
	}
}
