package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
)

// openTunnel makes a TLS connection to host through the proxy and returns it
// once the handshake is done, so the tunnel is open and spliced.
func (e *env) openTunnel(host string) *tls.Conn {
	e.t.Helper()
	pc := e.pipelined(host + ":" + itoa(e.origin.Addr.Port()))
	pc.Conn.SetDeadline(time.Time{})
	tc := tls.Client(pc, &tls.Config{ServerName: host, RootCAs: e.ca.Pool})
	if err := tc.Handshake(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { tc.Close() })
	return tc
}

func waitClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil && strings.Contains(err.Error(), "timeout") {
		t.Fatal("tunnel still open")
	}
}

func TestReloadNarrowingClosesLiveTunnel(t *testing.T) {
	e := newEnv(t)
	e.resolveToOrigin("api.allowed.example", "other.allowed.example")
	kept := e.openTunnel("api.allowed.example")
	cut := e.openTunnel("other.allowed.example")

	e.writeManifest("1.1.0", "api.allowed.example")
	if outs := e.registry.Load(e.cfg); outs[0].Result != policy.Loaded {
		t.Fatalf("reload: %+v", outs)
	}
	e.srv.Redecide()
	waitClosed(t, cut)
	e.log.waitEvent(t, map[string]any{"event": "close", "host": "other.allowed.example", "reason": "policy_narrowed"})

	// The tunnel still allowed keeps working.
	req, _ := http.NewRequest("GET", "https://api.allowed.example/", nil)
	req.Write(kept)
	resp, err := http.ReadResponse(bufio.NewReader(kept), req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("kept tunnel broken: %v", err)
	}
	// And a new connection to the removed host is refused.
	_, _, r2 := e.rawConnect("CONNECT other.allowed.example:" + itoa(e.origin.Addr.Port()) + " HTTP/1.1\r\n\r\n")
	if r2.StatusCode != 403 {
		t.Fatalf("status %d", r2.StatusCode)
	}
}

func TestGracefulDrainClosesTunnelsAtDeadline(t *testing.T) {
	e := newEnv(t)
	e.resolveToOrigin("api.allowed.example")
	tc := e.openTunnel("api.allowed.example")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if n := e.srv.Shutdown(ctx); n != 1 {
		t.Fatalf("closed %d tunnels at the deadline, want 1", n)
	}
	waitClosed(t, tc)
	e.log.waitEvent(t, map[string]any{"event": "close", "host": "api.allowed.example", "reason": "timeout"})
	if _, err := net.DialTimeout("tcp", e.addr, time.Second); err == nil {
		t.Fatal("listener still accepting after shutdown")
	}
}

func TestUnixSocketListenerChecksPeers(t *testing.T) {
	e := newEnv(t)
	e.resolveToOrigin("api.allowed.example")
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		peers policy.Peers
		ok    bool
	}{
		{"peer_allowed", policy.Peers{UIDs: []uint32{uint32(os.Getuid())}}, true},
		{"peer_refused", policy.Peers{UIDs: []uint32{4242424}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".sock")
			refused := make(chan uint32, 1)
			ln, err := Listen(context.Background(), "unix:"+path, tc.peers, func(uid, gid uint32) { refused <- uid })
			if err != nil {
				t.Fatal(err)
			}
			st, _ := os.Stat(path)
			if st.Mode().Perm() != 0o660 {
				t.Fatalf("socket mode %v", st.Mode().Perm())
			}
			go e.srv.Serve(ln)
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			io.WriteString(c, "CONNECT evil.example:443 HTTP/1.1\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if tc.ok && (err != nil || resp.Header.Get(ReasonHeader) != "not_allowlisted") {
				t.Fatalf("allowed peer: %v", err)
			}
			if !tc.ok && err == nil {
				t.Fatalf("refused peer got an answer: %d", resp.StatusCode)
			}
			if !tc.ok {
				if uid := <-refused; uid != uint32(os.Getuid()) {
					t.Fatalf("refusal reported for uid %d", uid)
				}
			}
			ln.Close()
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Fatalf("socket not removed on close: %v", err)
			}
		})
	}
}

func TestCurlThroughProxy(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is required in CI")
		}
		t.Skip("curl not installed")
	}
	e := newEnv(t)
	e.resolveToOrigin("api.allowed.example")
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(caFile, pemCert(e.ca.Cert.Raw), 0o600)
	port := itoa(e.origin.Addr.Port())
	out, err := exec.Command(curl, "-sS", "--cacert", caFile, "-x", "http://"+e.addr, "https://api.allowed.example:"+port+"/").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "hello from api.allowed.example") {
		t.Fatalf("allowed: %v %s", err, out)
	}
	out, err = exec.Command(curl, "-sS", "-v", "--cacert", caFile, "-x", "http://"+e.addr, "https://evil.example/").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "X-Egress-Reason: not_allowlisted") || !strings.Contains(string(out), "403") {
		t.Fatalf("denied: %v %s", err, out)
	}
}
