package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRequestLinesNetHTTPRefusesAreRefusedAndAudited is issue 18's third
// attacker, finding 3: request lines net/http's parser refuses before
// egressd's handler runs (a %-escape in the host, a signed port, a tab
// before the version, a lowercase method) were answered by net/http's bare
// 400, without X-Egress-Reason or a sentence. They get egressd's 400 now,
// and are in the audit log as bad_request, before their answer is written
// (CI once read the log between the answer and the close that audited it).
func TestRequestLinesNetHTTPRefusesAreRefusedAndAudited(t *testing.T) {
	e := newEnv(t)
	for _, line := range []string{
		"CONNECT ok%2eapi.allowed.example:443 HTTP/1.1\r\n\r\n",
		"CONNECT api.allowed.example:+443 HTTP/1.1\r\n\r\n",
		"CONNECT api.allowed.example:443\tHTTP/1.1\r\n\r\n",
		"connect api.allowed.example:443 HTTP/1.1\r\n\r\n",
	} {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, line)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil || resp.StatusCode != http.StatusBadRequest || resp.Header.Get(ReasonHeader) != "bad_request" {
			t.Fatalf("%q: %v %v", line, resp, err)
		}
		if body, _ := io.ReadAll(resp.Body); !strings.HasPrefix(string(body), "egressd: ") {
			t.Fatalf("%q: no sentence: %q", line, body)
		}
		if !e.log.has(t, map[string]any{"event": "connect", "reason": "bad_request", "msg": "request line egressd cannot parse"}) {
			t.Fatalf("%q: answered before its refusal was in the audit log", line)
		}
	}
}
