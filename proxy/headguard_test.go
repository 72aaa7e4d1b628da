package proxy

import (
	"strings"
	"testing"
)

// TestFirstLineKeepsTheTargetWithinItsBound: the line a refused request is
// named by is read for the target it names, arrives in any number of reads,
// skips the blank lines a client may send first, and is never more than
// maxFirstLine bytes however long the client makes it.
func TestFirstLineKeepsTheTargetWithinItsBound(t *testing.T) {
	for _, c := range []struct {
		reads       []string
		method, raw string
		wantLen     int
	}{
		{reads: []string{"CONNECT a.example:443 HTTP/1.1\r\nHost: x\r\n\r\n"}, method: "CONNECT", raw: "a.example:443"},
		{reads: []string{"\r\n", "\r\nconn", "ect b.exa", "mple:443 HTTP/1.1\r", "\nX: y\r\n"}, method: "connect", raw: "b.example:443"},
		{reads: []string{"CONNECT c.example:443\tHTTP/1.1\r\n"}, method: "CONNECT", raw: "c.example:443"},
		{reads: []string{" CONNECT\x0b\x0bd.example:443 HTTP/1.1\r\n"}, method: "CONNECT", raw: "d.example:443"},
		{reads: []string{"\x16\x03\x01\x02\x00\x01 \x00"}, method: "", raw: "\x16\x03\x01\x02\x00\x01 \x00"}, // no clean method: all of it
		{reads: []string{"garbage-without-a-space\r\n"}, raw: "garbage-without-a-space"},
		{reads: []string{"CONNECT " + strings.Repeat("d", 4000) + ":443 HTTP/1.1\r\n"}, method: "CONNECT", wantLen: maxFirstLine - len("CONNECT ")},
	} {
		var l firstLine
		for _, r := range c.reads {
			l.keep([]byte(r))
		}
		if len(l.b) > maxFirstLine {
			t.Fatalf("%.40q: kept %d bytes", c.reads, len(l.b))
		}
		got := l.target()
		if got.method != c.method || (c.wantLen == 0 && got.raw != c.raw) || (c.wantLen != 0 && len(got.raw) != c.wantLen) {
			t.Fatalf("%.40q: got %q %.40q", c.reads, got.method, got.raw)
		}
	}
}
