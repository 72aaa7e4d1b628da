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

// TestParsePacketReadsAFragmentedIPv6Datagram: a UDP datagram larger than
// the MTU leaves in fragments; the first is the attempt, the rest are not.
func TestParsePacketReadsAFragmentedIPv6Datagram(t *testing.T) {
	pkt := make([]byte, 40+8+8)
	pkt[0] = 0x60
	pkt[4], pkt[5] = 0, 16 // payload: fragment header and UDP header
	pkt[6], pkt[7] = protoFragment, 64
	dst := netip.MustParseAddr("2001:db8::9").As16()
	copy(pkt[24:], dst[:])
	pkt[40] = protoUDP
	pkt[48+2], pkt[48+3] = 0x01, 0xbb // port 443
	a, _, ok := parsePacket(pkt)
	if !ok || a.Proto != "udp" || a.Dst != netip.MustParseAddrPort("[2001:db8::9]:443") {
		t.Fatalf("first fragment: %+v %v", a, ok)
	}
	pkt[42], pkt[43] = 0x05, 0xa8 // offset 181 (x8 bytes)
	if a, _, ok := parsePacket(pkt); ok {
		t.Fatalf("a later fragment was read as an attempt: %+v", a)
	}
}
