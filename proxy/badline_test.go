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
		if !e.log.has(t, map[string]any{"event": "connect", "reason": "bad_request", "msg": "request egressd cannot parse (request line or headers)"}) {
			t.Fatalf("%q: answered before its refusal was in the audit log", line)
		}
	}
}

// TestMalformedHeadsNameTheTargetTheyAskedFor is issue 18's fifth
// attacker, finding 1: a CONNECT whose headers net/http refuses (a folded
// line, a duplicate Host, a line without a colon) or whose request line it
// refuses (a lowercase method, a leading blank line) was audited with no
// host, so the target was invisible and every such attempt folded into one
// line. Each is refused with egressd's 400 and its record, written before
// the answer, names the target: the canonical host when it parses, else
// the raw target. (Each is under its own registrable domain: the
// suppressor folds a flood within one, as it does every refusal.)
func TestMalformedHeadsNameTheTargetTheyAskedFor(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		head string
		want map[string]any
	}{
		{"CONNECT c2.one.example:443 HTTP/1.1\r\n\tfolded\r\n\r\n", map[string]any{"host": "c2.one.example", "port": float64(443)}},
		{"CONNECT c2.two.example:443 HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", map[string]any{"host": "c2.two.example"}},
		{"CONNECT c2.three.example:443 HTTP/1.1\r\nBad Header\r\n\r\n", map[string]any{"host": "c2.three.example"}},
		{"connect c2.four.example:443 HTTP/1.1\r\n\r\n", map[string]any{"host": "c2.four.example", "method": "connect"}},
		{"\r\n\r\nCONNECT c2.five.example:443 HTTP/1.1\r\n\r\n", map[string]any{"host": "c2.five.example"}},
		{"CONNECT 192.0.2.7:443 HTTP/1.1\r\nBad Header\r\n\r\n", map[string]any{"host_raw": "192.0.2.7:443"}},
		{"CONNECT six%2eevil.example:443 HTTP/1.1\r\n\r\n", map[string]any{"host_raw": "six%2eevil.example:443"}},
	} {
		resp := rawRequest(t, e.addr, c.head)
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(ReasonHeader) != "bad_request" {
			t.Fatalf("%q: %v", c.head, resp.Status)
		}
		want := map[string]any{"event": "connect", "reason": "bad_request", "msg": "request egressd cannot parse (request line or headers)"}
		for k, v := range c.want {
			want[k] = v
		}
		if !e.log.has(t, want) {
			t.Fatalf("%q: no record %v before the answer; log:\n%s", c.head, want, e.log.String())
		}
	}
	if strings.Contains(e.log.String(), "folded") {
		t.Fatalf("distinct targets folded together:\n%s", e.log.String())
	}
}

// TestOversizedHeadIsEgressdsOwn431NamingItsTarget: a header block over
// the limit got net/http's bare 431 (no reason, no sentence) and a record
// without its target, written only when the connection closed. It gets
// egressd's 431 with X-Egress-Reason and a sentence, audited before the
// answer, naming the host.
func TestOversizedHeadIsEgressdsOwn431NamingItsTarget(t *testing.T) {
	e := newEnv(t)
	head := "CONNECT big.evil.example:443 HTTP/1.1\r\nX-A: " + strings.Repeat("a", 64<<10) + "\r\n\r\n"
	resp := rawRequest(t, e.addr, head)
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || resp.Header.Get(ReasonHeader) != "bad_request" {
		t.Fatalf("%v %v", resp.Status, resp.Header)
	}
	if body, _ := io.ReadAll(resp.Body); !strings.HasPrefix(string(body), "egressd: ") {
		t.Fatalf("no sentence: %q", body)
	}
	want := map[string]any{"event": "connect", "reason": "bad_request", "host": "big.evil.example", "msg": "request headers over egressd's limit"}
	if !e.log.has(t, want) {
		t.Fatalf("no record %v before the answer; log:\n%s", want, e.log.String())
	}
}

// rawRequest sends head on a new connection and reads the answer.
func rawRequest(t *testing.T, addr, head string) *http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	go io.WriteString(c, head) // a head over the limit is answered before it is all sent
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%.60q: %v", head, err)
	}
	return resp
}

// TestRequestLineSplitByOtherWhitespaceNamesItsTarget is issue 18's sixth
// review: the kept request line was split on single spaces, so
// "CONNECT  host:443" (two spaces), a tab or a vertical tab after the
// method, or a leading space audited the target as "", "HTTP/1.1" or
// "CONNECT": the host the client asked for was hidden. The target is the
// token after the method across any run of ASCII whitespace; a line with
// no clean method and target is logged whole, escaped, as host_raw.
func TestRequestLineSplitByOtherWhitespaceNamesItsTarget(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		head string
		want map[string]any
	}{
		{"CONNECT  ws1.one.example:443 HTTP/1.1\r\n\r\n", map[string]any{"host": "ws1.one.example", "port": float64(443), "method": "CONNECT"}},
		{"CONNECT\tws2.two.example:443 HTTP/1.1\r\n\r\n", map[string]any{"host": "ws2.two.example", "method": "CONNECT"}},
		{"CONNECT\x0bws3.three.example:443 HTTP/1.1\r\n\r\n", map[string]any{"host": "ws3.three.example", "method": "CONNECT"}},
		{" CONNECT ws4.four.example:443 HTTP/1.1\r\n\r\n", map[string]any{"host": "ws4.four.example", "method": "CONNECT"}},
		{"CONNECT \t\f ws5.five.example:443\t\tHTTP/1.1\r\n\r\n", map[string]any{"host": "ws5.five.example", "method": "CONNECT"}},
		{"C(NNECT ws6.six.example:443 HTTP/1.1\r\n\r\n", map[string]any{"host_raw": `C(NNECT ws6.six.example:443 HTTP/1.1`}},
		{"\x01CONNECT\x1b[2J ws7.seven.example:443\r\n\r\n", map[string]any{"host_raw": `\x01CONNECT\x1b[2J ws7.seven.example:443`}},
	} {
		resp := rawRequest(t, e.addr, c.head)
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(ReasonHeader) != "bad_request" {
			t.Fatalf("%q: %v", c.head, resp.Status)
		}
		want := map[string]any{"event": "connect", "reason": "bad_request"}
		for k, v := range c.want {
			want[k] = v
		}
		if !e.log.has(t, want) {
			t.Fatalf("%q: no record %v; log:\n%s", c.head, want, e.log.String())
		}
	}
}
