package proxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
)

// pipelinedConn is a test client connection that sends the CONNECT head in
// the same write as the first TLS bytes (so they are pipelined behind it),
// strips the proxy's 200 before TLS reads, and counts the tunnel bytes each
// way so the audit close event can be checked exactly.
type pipelinedConn struct {
	net.Conn
	br       *bufio.Reader
	head     string
	sentHead bool
	gotResp  bool
	status   int
	up, down atomic.Int64
}

func (c *pipelinedConn) Write(p []byte) (int, error) {
	if !c.sentHead {
		c.sentHead = true
		if _, err := c.Conn.Write(append([]byte(c.head), p...)); err != nil {
			return 0, err
		}
		c.up.Add(int64(len(p)))
		return len(p), nil
	}
	n, err := c.Conn.Write(p)
	c.up.Add(int64(n))
	return n, err
}

func (c *pipelinedConn) Read(p []byte) (int, error) {
	if !c.gotResp {
		resp, err := http.ReadResponse(c.br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			return 0, err
		}
		c.gotResp, c.status = true, resp.StatusCode
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("CONNECT: %s (%s)", resp.Status, resp.Header.Get(ReasonHeader))
		}
	}
	n, err := c.br.Read(p)
	c.down.Add(int64(n))
	return n, err
}

func (e *env) pipelined(target string) *pipelinedConn {
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &pipelinedConn{Conn: c, br: bufio.NewReader(c), head: "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"}
}

func TestPipelinedBytesAfterConnectAreNotLost(t *testing.T) {
	e := newEnv(t)
	e.resolveToOrigin("api.allowed.example")
	target := "api.allowed.example:" + itoa(e.origin.Addr.Port())
	pc := e.pipelined(target)
	tc := tls.Client(pc, &tls.Config{ServerName: "api.allowed.example", RootCAs: e.ca.Pool})
	payload := strings.Repeat("x", 100000)
	req, _ := http.NewRequest("POST", "https://"+target+"/echo", strings.NewReader(payload))
	req.Close = true
	if err := req.Write(tc); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != payload {
		t.Fatalf("echo returned %d bytes, want %d", len(body), len(payload))
	}
	// Read to the origin's close_notify and EOF, so every byte the proxy
	// sent down has been read and counted here, then close our side.
	io.Copy(io.Discard, tc)
	tc.Close()
	closeEv := e.log.waitEvent(t, map[string]any{"event": "close", "host": "api.allowed.example"})
	// The origin closes after the response (req.Close), so every byte each
	// side sent has been counted on both ends by now.
	if int64(closeEv["bytes_up"].(float64)) != pc.up.Load() || int64(closeEv["bytes_down"].(float64)) != pc.down.Load() {
		t.Fatalf("close event bytes up %v down %v; client counted up %d down %d", closeEv["bytes_up"], closeEv["bytes_down"], pc.up.Load(), pc.down.Load())
	}
}

// rawTunnel sends CONNECT, waits for 200, then writes first and reports
// whether the proxy closed the tunnel.
func (e *env) rawTunnel(target string, first []byte) (status int, closed bool) {
	c, br, resp := e.rawConnect("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n")
	if resp.StatusCode != 200 {
		return resp.StatusCode, true
	}
	c.Write(first)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := br.ReadByte()
	return 200, err == io.EOF
}

func TestTunnelRefusesWhatIsNotTheDeclaredTLSHost(t *testing.T) {
	e := newEnv(t)
	e.resolveToOrigin("api.allowed.example")
	target := "api.allowed.example:" + itoa(e.origin.Addr.Port())
	cases := []struct {
		name   string
		first  []byte
		reason string
	}{
		{"sni_mismatch_domain_fronting", buildHello(helloSpec{names: []string{"evil.example"}}), "sni_mismatch"},
		{"sni_missing", buildHello(helloSpec{noSNI: true, extra: []uint16{10}}), "sni_missing"},
		{"sni_two_server_name_entries", buildHello(helloSpec{names: []string{"api.allowed.example", "evil.example"}}), "sni_missing"},
		{"ech_present", buildHello(helloSpec{names: []string{"api.allowed.example"}, extra: []uint16{extEncryptedClientHello}}), "ech_present"},
		{"plaintext_in_tunnel", []byte("GET / HTTP/1.1\r\nHost: api.allowed.example\r\n\r\n"), "not_tls"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, closed := e.rawTunnel(target, tc.first)
			if status != 200 || !closed {
				t.Fatalf("status %d, closed %v", status, closed)
			}
			e.log.waitEvent(t, map[string]any{"event": "connect", "decision": "deny", "reason": tc.reason, "host": "api.allowed.example"})
		})
	}
}

func TestSNICaseDifferenceIsTheSameHost(t *testing.T) {
	e := newEnv(t)
	e.resolveToOrigin("api.allowed.example")
	target := "api.allowed.example:" + itoa(e.origin.Addr.Port())
	pc := e.pipelined(target)
	tc := tls.Client(pc, &tls.Config{ServerName: "API.Allowed.Example", RootCAs: e.ca.Pool})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	tc.Close()
	e.log.waitEvent(t, map[string]any{"event": "connect", "decision": "allow", "host": "api.allowed.example"})
}

func TestSlowClientHelloIsCutOff(t *testing.T) {
	e := newEnv(t, withConfig(func(c *policy.Config) { c.Timeouts.ClientHello = 300 * time.Millisecond }))
	e.resolveToOrigin("api.allowed.example")
	target := "api.allowed.example:" + itoa(e.origin.Addr.Port())
	hello := buildHello(helloSpec{names: []string{"api.allowed.example"}})
	status, closed := e.rawTunnel(target, hello[:10]) // then nothing
	if status != 200 || !closed {
		t.Fatalf("status %d closed %v", status, closed)
	}
	e.log.waitEvent(t, map[string]any{"event": "connect", "decision": "deny", "reason": "timeout"})
}
