package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// notifications is a fake NOTIFY_SOCKET: READY=1 after a reload is the
// event that says its limits are in force.
type notifications struct {
	path  string
	notes chan string
}

func listenNotify(t *testing.T, dir string) *notifications {
	n := &notifications{path: filepath.Join(dir, "notify.sock"), notes: make(chan string, 16)}
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := sock.Read(buf)
			if err != nil {
				return
			}
			n.notes <- string(buf[:k])
		}
	}()
	return n
}

func (n *notifications) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-n.notes:
		if !strings.Contains(got, want) {
			t.Fatalf("sd_notify %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no sd_notify %q", want)
	}
}

// withBrokeredCap writes cfg again with limits.max_brokered_connections n.
func withBrokeredCap(t *testing.T, cfg string, n int) {
	body, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body = []byte(strings.TrimPrefix(string(body), string(body[:strings.Index(string(body), "state_dir:")])))
	if err := os.WriteFile(cfg, append([]byte("limits:\n  max_brokered_connections: "+strconv.Itoa(n)+"\n"), body...), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestServeIntegrationPastItsBrokeredCapIsRefusedUntilAReloadRaisesIt: the
// real serve binary with a config binding a secret and
// limits.max_brokered_connections 1. A kept-alive brokered connection
// from a real net/http client fills it: the next CONNECT to the bound
// host is refused 503 limit_exceeded, naming the limit and its value,
// while the unbound host still splices. A reload (SIGHUP) raising it to 2
// admits one more connection and refuses the third, naming 2.
func TestServeIntegrationPastItsBrokeredCapIsRefusedUntilAReloadRaisesIt(t *testing.T) {
	s := newBrokeredServeSetup(t)
	cfg := s.config(t, nil)
	withBrokeredCap(t, cfg, 1)
	notify := listenNotify(t, s.dir)
	sp := startServeProcessTo(t, cfg, nil, "NOTIFY_SOCKET="+notify.path)
	notify.expect(t, "READY=1")

	var held []*http.Transport
	hold := func(host, caFile string) {
		t.Helper()
		pem, err := os.ReadFile(caFile)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: sp.listen}), TLSClientConfig: &tls.Config{RootCAs: pool}}
		held = append(held, tr)
		t.Cleanup(tr.CloseIdleConnections)
		req, _ := http.NewRequest("GET", "https://"+host+":"+s.rec.port+"/", nil)
		req.Header.Set("Authorization", "Bearer "+configPlaceholder)
		resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: tr}).Do(req)
		if err != nil {
			t.Fatalf("%s: %v\n%s", host, err, sp.stderr.String())
		}
		body, _ := io.ReadAll(resp.Body) // to the end, so the connection stays open
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "hello from "+host {
			t.Fatalf("%s: %d %q", host, resp.StatusCode, body)
		}
	}
	refused := func(max int) {
		t.Helper()
		c, err := net.Dial("tcp", sp.listen)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		target := "api.bound.example:" + s.rec.port
		io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("X-Egress-Reason") != "limit_exceeded" ||
			!strings.Contains(string(body), "limits.max_brokered_connections ("+strconv.Itoa(max)+")") {
			t.Fatalf("CONNECT past a cap of %d: %d %q %q", max, resp.StatusCode, resp.Header.Get("X-Egress-Reason"), body)
		}
	}

	hold("api.bound.example", s.caCert)
	refused(1)
	hold("plain.bound.example", s.originCA) // spliced: not counted

	withBrokeredCap(t, cfg, 2)
	sp.cmd.Process.Signal(syscall.SIGHUP)
	notify.expect(t, "RELOADING=1")
	notify.expect(t, "READY=1")
	hold("api.bound.example", s.caCert)
	refused(2)
	if got := s.rec.received("api.bound.example"); len(got) != 2 || got[1] != "Bearer "+brokeredValue {
		t.Fatalf("the bound host received %q", got)
	}
	waitFor(t, &lockedFile{path: filepath.Join(s.dir, "audit.log")}, `"decision":"deny"[^\n]*"reason":"limit_exceeded"|"reason":"limit_exceeded"[^\n]*"decision":"deny"`)
	for _, tr := range held {
		tr.CloseIdleConnections() // or the stop waits timeouts.drain for them
	}
	sp.stop(t)
}
