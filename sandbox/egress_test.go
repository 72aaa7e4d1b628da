package sandbox

import (
	"net/netip"
	"testing"
)

// TestParsePacketSurvivesEveryTruncation: a packet cut anywhere is
// ignored, never a panic; the whole SYN is an attempt with its reset.
func TestParsePacketSurvivesEveryTruncation(t *testing.T) {
	for _, from := range []netip.AddrPort{netip.MustParseAddrPort("192.0.0.8:40000"), netip.MustParseAddrPort("[100::8]:40000")} {
		to := netip.MustParseAddrPort("192.0.2.1:8080")
		if from.Addr().Is6() {
			to = netip.MustParseAddrPort("[2001:db8::1]:8080")
		}
		syn := tcpReset(from, to, 0)
		syn[len(syn)-20+13] = tcpSYN // the reset's layout, with SYN instead
		a, reset, ok := parsePacket(syn)
		if !ok || a.Proto != "tcp" || a.Dst != to || reset == nil {
			t.Fatalf("SYN from %s: %+v %v", from, a, ok)
		}
		if back, _, ok := parsePacket(reset); ok {
			t.Fatalf("a reset was read as an attempt: %+v", back)
		}
		for n := range syn {
			parsePacket(syn[:n])
		}
	}
}
