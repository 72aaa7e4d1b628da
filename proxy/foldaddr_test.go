package proxy

import (
	"strconv"
	"testing"
	"time"
)

// TestWireServerBehindDecoysIsNamedInTheLogAndCountedAtItsEntry is issue
// 18's third attacker, finding 1, end to end: 13 allowed names resolving
// to documentation addresses, then one resolving to Azure's WireServer
// 168.63.129.16, in one folding window. Every one is a 403
// private_address; the WireServer attempt was folded under the name's
// domain and named nowhere. It has a line now, and every deny line carries
// the manifest entry that allowed the name, so the report counts all 14
// at it.
func TestWireServerBehindDecoysIsNamedInTheLogAndCountedAtItsEntry(t *testing.T) {
	e := newEnv(t, withFoldWindow(time.Hour))
	for i := range 13 {
		e.dns.Add(t, "d"+strconv.Itoa(i)+".cdn.allowed.example. 60 IN A 192.0.2."+strconv.Itoa(i+1))
	}
	e.dns.Add(t, "wire.cdn.allowed.example. 60 IN A 168.63.129.16")
	for i := range 13 {
		if resp, err := e.sendConnect("d" + strconv.Itoa(i) + ".cdn.allowed.example:443"); err != nil || resp.StatusCode != 403 {
			t.Fatalf("decoy %d: %v %v", i, resp, err)
		}
	}
	if resp, err := e.sendConnect("wire.cdn.allowed.example:443"); err != nil || resp.Header.Get(ReasonHeader) != "private_address" {
		t.Fatalf("wire: %v %v", resp, err)
	}
	e.log.waitEvent(t, map[string]any{"event": "connect", "host": "wire.cdn.allowed.example", "addr": "168.63.129.16", "rule": "*.cdn.allowed.example"})
	e.srv.opts.Suppress.Flush(true)
	if tried := triedAtEntry(t, e, "*.cdn.allowed.example"); tried != 14 {
		t.Fatalf("the report counts %d attempts at *.cdn.allowed.example, want 14\n%s", tried, e.log.String())
	}
}
