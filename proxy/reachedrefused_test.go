package proxy

import (
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
)

// silentOrigin listens on 127.0.0.2 and never answers: it counts the bytes
// each connection delivered, sent on the channel when the connection ends.
func silentOrigin(t *testing.T) (port uint16, delivered <-chan int64) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan int64, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				n, _ := io.Copy(io.Discard, c)
				ch <- n
			}()
		}
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port), ch
}

// TestEarlyDataDeliveredBeforeABadRecordIsReportedAsReachedNotNeverConnected
// is issue 18's break 2 (f18b), end to end: a valid ClientHello, then two
// application_data records (early data, forwarded to the origin before it
// answers), then a record of type 24. egressd refuses the tunnel not_tls,
// but the origin had the early data; the report listed the host under
// "tried, never connected". It is reported as reached, then refused, with
// the bytes the origin received.
func TestEarlyDataDeliveredBeforeABadRecordIsReportedAsReachedNotNeverConnected(t *testing.T) {
	port, delivered := silentOrigin(t)
	e := newEnv(t, withConfig(func(c *policy.Config) {
		c.Integrations[0].Exemptions.AllowPorts = append(c.Integrations[0].Exemptions.AllowPorts, port)
	}))
	e.resolveToOrigin("api.allowed.example")
	early := make([]byte, 4000)
	copy(early, "POST /upload HTTP/1.1\r\nHost: api.allowed.example\r\n\r\nEXFIL-MARKER ")
	record := func(typ byte, p []byte) []byte {
		return append([]byte{typ, 3, 3, byte(len(p) >> 8), byte(len(p))}, p...)
	}
	hello := buildHello(helloSpec{names: []string{"api.allowed.example"}})
	first := append(append(append(append([]byte{}, hello...), record(recordTypeApplicationData, early)...), record(recordTypeApplicationData, early)...), record(24, []byte("x"))...)
	target := net.JoinHostPort("api.allowed.example", itoa(port))
	if status, closed := e.rawTunnel(target, first); status != 200 || !closed {
		t.Fatalf("status %d, closed %v", status, closed)
	}
	got := <-delivered
	if want := int64(len(hello) + 2*(5+len(early))); got != want {
		t.Fatalf("the origin received %d bytes, want the hello and both early records, %d", got, want)
	}
	e.log.waitEvent(t, map[string]any{"event": "connect", "decision": "deny", "reason": "not_tls", "host": "api.allowed.example"})
	e.log.waitEvent(t, map[string]any{"event": "close", "host": "api.allowed.example", "bytes_up": int(got), "hello_bytes": len(hello)})

	var recs []audit.Record
	for _, l := range e.log.events(t) {
		b, _ := json.Marshal(l)
		var r audit.Record
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	rep := audit.BuildReport(recs, map[string][]string{"com.test.weather": {"api.allowed.example"}})
	ir := rep.Integrations[0]
	want := audit.RefusedUse{Host: "api.allowed.example", Rule: "api.allowed.example", Reason: "not_tls", Connections: 1, BytesUp: got}
	if len(ir.ReachedThenRefused) != 1 || ir.ReachedThenRefused[0] != want || len(ir.TriedNeverConnected) != 0 {
		t.Fatalf("reached then refused %+v (want %+v), tried, never connected %+v", ir.ReachedThenRefused, want, ir.TriedNeverConnected)
	}
}

// TestAPaddedHelloThenAMismatchedHelloIsReportedAsReachedNotNeverConnected
// is issue 18's ninth-round break f2: a first ClientHello with the allowed
// SNI carries 15,000 bytes in a padding extension and is forwarded to the
// origin; a second hello right behind it names another host and is
// refused sni_mismatch. The origin had the 15 KB, yet the report listed
// the host as "tried, never connected" because bytes up equalled the
// hello's size. A hello that reached the origin is a delivery.
func TestAPaddedHelloThenAMismatchedHelloIsReportedAsReachedNotNeverConnected(t *testing.T) {
	port, delivered := silentOrigin(t)
	e := newEnv(t, withConfig(func(c *policy.Config) {
		c.Integrations[0].Exemptions.AllowPorts = append(c.Integrations[0].Exemptions.AllowPorts, port)
	}))
	e.resolveToOrigin("api.allowed.example")
	secret := make([]byte, 15000)
	copy(secret, "EXFIL-MARKER")
	padded := buildHello(helloSpec{names: []string{"api.allowed.example"}, padding: secret})
	other := buildHello(helloSpec{names: []string{"other.example"}})
	target := net.JoinHostPort("api.allowed.example", itoa(port))
	if status, closed := e.rawTunnel(target, append(append([]byte{}, padded...), other...)); status != 200 || !closed {
		t.Fatalf("status %d, closed %v", status, closed)
	}
	got := <-delivered
	if got != int64(len(padded)) {
		t.Fatalf("the origin received %d bytes, want the padded hello, %d", got, len(padded))
	}
	e.log.waitEvent(t, map[string]any{"event": "connect", "decision": "deny", "reason": "sni_mismatch", "host": "api.allowed.example"})
	e.log.waitEvent(t, map[string]any{"event": "close", "host": "api.allowed.example", "bytes_up": int(got), "hello_bytes": len(padded)})

	var recs []audit.Record
	for _, l := range e.log.events(t) {
		b, _ := json.Marshal(l)
		var r audit.Record
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	rep := audit.BuildReport(recs, map[string][]string{"com.test.weather": {"api.allowed.example"}})
	ir := rep.Integrations[0]
	want := audit.RefusedUse{Host: "api.allowed.example", Rule: "api.allowed.example", Reason: "sni_mismatch", Connections: 1, HelloOnly: 1, BytesUp: got}
	if len(ir.ReachedThenRefused) != 1 || ir.ReachedThenRefused[0] != want || len(ir.TriedNeverConnected) != 0 {
		t.Fatalf("reached then refused %+v (want %+v), tried, never connected %+v", ir.ReachedThenRefused, want, ir.TriedNeverConnected)
	}
	var text strings.Builder
	if err := audit.WriteText(&text, rep); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text.String(), "never connected") || !strings.Contains(text.String(), "only a ClientHello") {
		t.Fatalf("text report:\n%s", text.String())
	}
}
