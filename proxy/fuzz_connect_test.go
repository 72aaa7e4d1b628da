package proxy

import (
	"bufio"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
)

// FuzzConnectRequest sends arbitrary request heads to the real proxy. The
// proxy must answer (or close) every one without crashing, keep serving the
// next, never tunnel (no name resolves in this fuzz environment, so nothing
// can be allowed through), and tag every answer of its own with a reason.
func FuzzConnectRequest(f *testing.F) {
	for _, seed := range []string{
		"CONNECT api.allowed.example:443 HTTP/1.1\r\n\r\n",
		"CONNECT evil.example:443 HTTP/1.1\r\nHost: x\r\n\r\n",
		"CONNECT [::1]:443 HTTP/1.1\r\n\r\n",
		"CONNECT %31%32%37.0.0.1:443 HTTP/1.1\r\n\r\n",
		"GET http://api.allowed.example/ HTTP/1.1\r\nHost: api.allowed.example\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\n\r\n",
		"CONNECT api.allowed.example:443 HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
		"CONNECT a:1 HTTP/1.0\r\n\r\nCONNECT b:2 HTTP/1.1\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	e := newEnv(f, withConfig(func(c *policy.Config) {
		c.Limits.ConnectionsPerSecond, c.Limits.Burst = 1e9, 1<<30
		c.Timeouts.RequestHeader = 200 * time.Millisecond
		c.Timeouts.DNS = 200 * time.Millisecond
	}))
	f.Fuzz(func(t *testing.T, head []byte) {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatalf("the proxy stopped accepting: %v", err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write(head)
		if tcp, ok := c.(*net.TCPConn); ok {
			tcp.CloseWrite()
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
		if err != nil {
			return // closed without an answer: fine
		}
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("tunnel opened for %q", head)
		}
		// net/http answers a few malformed heads itself, before any
		// handler; egressd replaces those answers (headGuard), so every
		// answer is egressd's and carries its reason.
		if resp.Header.Get(ReasonHeader) == "" {
			t.Fatalf("answer %d without a reason for %q", resp.StatusCode, head)
		}
	})
}
