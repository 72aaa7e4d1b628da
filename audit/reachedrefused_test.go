package audit

import (
	"bytes"
	"strings"
	"testing"
)

// earlyDataThenBadRecord is issue 18's break 2 (f18b) as a log: a valid
// ClientHello (517 bytes) is allowed, the early data behind it is
// forwarded, then a bad record refuses the tunnel (not_tls, same conn): the
// close says 8311 bytes went up.
func earlyDataThenBadRecord(up, down int64) []Record {
	return []Record{
		{Time: at(0), Event: "connect", Integration: "com.atk.one", Decision: "allow", Reason: "allowed", Host: "pub.t.example", Rule: "pub.t.example", Conn: "c1"},
		{Time: at(1), Event: "connect", Integration: "com.atk.one", Decision: "deny", Reason: "not_tls", Host: "pub.t.example", Rule: "pub.t.example", Conn: "c1"},
		{Time: at(1), Event: "close", Integration: "com.atk.one", Decision: "allow", Reason: "not_tls", Host: "pub.t.example", Conn: "c1", BytesUp: up, BytesDown: down, HelloBytes: 517},
	}
}

// TestBytesThatReachedTheOriginAreNeverReportedAsNeverConnected: the
// report listed pub.t.example under "tried, never connected" with 8311
// bytes delivered. A tunnel whose close shows more than its ClientHello
// went up, or anything came down, reached the origin: it is reported as
// reached, then refused, with its bytes.
func TestBytesThatReachedTheOriginAreNeverReportedAsNeverConnected(t *testing.T) {
	for _, c := range []struct {
		name     string
		up, down int64
		reached  bool
		hello    int64 // connections that sent only the ClientHello
	}{
		{"early data went up", 8311, 0, true, 0},
		{"the origin answered", 517, 90, true, 0},
		{"only the checked hello went up", 517, 0, true, 1},
		{"nothing went up", 0, 0, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := BuildReport(earlyDataThenBadRecord(c.up, c.down), map[string][]string{"com.atk.one": {"pub.t.example"}})
			ir := rep.Integrations[0]
			if !c.reached {
				if len(ir.ReachedThenRefused) != 0 || len(ir.TriedNeverConnected) != 1 {
					t.Fatalf("reached then refused %+v, tried %+v", ir.ReachedThenRefused, ir.TriedNeverConnected)
				}
				return
			}
			want := RefusedUse{Host: "pub.t.example", Rule: "pub.t.example", Reason: "not_tls", Connections: 1, HelloOnly: c.hello, BytesUp: c.up, BytesDown: c.down}
			if len(ir.ReachedThenRefused) != 1 || ir.ReachedThenRefused[0] != want {
				t.Fatalf("reached then refused = %+v, want %+v", ir.ReachedThenRefused, want)
			}
			if len(ir.TriedNeverConnected) != 0 || len(ir.Unused) != 0 {
				t.Fatalf("an entry that reached its origin is reported as tried, never connected %+v, or unused %v", ir.TriedNeverConnected, ir.Unused)
			}
			var text bytes.Buffer
			if err := WriteText(&text, rep); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(text.String(), "never connected") || !strings.Contains(text.String(), "reached, then refused") {
				t.Fatalf("text report:\n%s", text.String())
			}
			var html bytes.Buffer
			if err := WriteHTML(&html, rep); err != nil || !strings.Contains(html.String(), "Reached, then refused") {
				t.Fatalf("HTML report (%v) has no reached-then-refused section", err)
			}
		})
	}
}
