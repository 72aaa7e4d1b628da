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

// TestParsePacketFindsTheFinalDestinationBehindExtensionHeaders: a SYN
// behind hop-by-hop options and a segment routing header whose first
// segment is a decoy is an attempt on the final segment, with its reset
// from there; every truncation of it is ignored, never a panic.
func TestParsePacketFindsTheFinalDestinationBehindExtensionHeaders(t *testing.T) {
	from := netip.MustParseAddrPort("[100::8]:40000")
	final, decoy := netip.MustParseAddr("2001:db8::bad:f1a1").As16(), netip.MustParseAddr("2001:db8::dec0").As16()
	syn := tcpReset(from, netip.AddrPortFrom(netip.AddrFrom16(decoy), 443), 0)
	syn[len(syn)-20+13] = tcpSYN
	hop := []byte{protoRouting, 0, 1, 4, 0, 0, 0, 0}
	srh := append([]byte{protoTCP, 4, 4, 1, 1, 0, 0, 0}, final[:]...)
	srh = append(srh, decoy[:]...)
	pkt := append(append(append(append([]byte{}, syn[:40]...), hop...), srh...), syn[40:]...)
	pkt[6] = protoHopByHop
	pkt[4], pkt[5] = 0, byte(len(pkt)-40)
	a, reset, ok := parsePacket(pkt)
	if want := netip.AddrPortFrom(netip.AddrFrom16(final), 443); !ok || a.Proto != "tcp" || a.Dst != want || reset == nil {
		t.Fatalf("got %+v %v, want tcp to %s", a, ok, want)
	}
	if back, _, _ := parsePacket(reset); back.Dst.IsValid() {
		t.Fatalf("the reset was read as an attempt: %+v", back)
	}
	if got := netip.AddrFrom16([16]byte(reset[8:24])); got != netip.AddrFrom16(final) {
		t.Fatalf("the reset comes from %s, not the final destination the socket is connected to", got)
	}
	for n := range pkt {
		parsePacket(pkt[:n])
	}
}

// TestParsePacketFindsTheFinalSegmentBeforeATLV is issue 12's sixth
// attacker, finding 3: a segment routing header with a PadN TLV after its
// segments has an odd length, and the reader took only even ones, so the
// attempt was audited at the decoy and never reset.
func TestParsePacketFindsTheFinalSegmentBeforeATLV(t *testing.T) {
	from := netip.MustParseAddrPort("[100::8]:40000")
	final, decoy := netip.MustParseAddr("2001:db8::77").As16(), netip.MustParseAddr("2001:db8:dec0::9").As16()
	syn := tcpReset(from, netip.AddrPortFrom(netip.AddrFrom16(decoy), 443), 0)
	syn[len(syn)-20+13] = tcpSYN
	srh := append([]byte{protoTCP, 5, 4, 1, 1, 0, 0, 0}, final[:]...)
	srh = append(append(srh, decoy[:]...), 4, 6, 0, 0, 0, 0, 0, 0) // PadN, 8 bytes: length 5
	pkt := append(append(append([]byte{}, syn[:40]...), srh...), syn[40:]...)
	pkt[6] = protoRouting
	pkt[4], pkt[5] = 0, byte(len(pkt)-40)
	a, reset, ok := parsePacket(pkt)
	if want := netip.AddrPortFrom(netip.AddrFrom16(final), 443); !ok || a.Dst != want || reset == nil {
		t.Fatalf("got %+v %v, want tcp to %s with its reset", a, ok, want)
	}
}

// TestParsePacketAuditsAnyProtocolToALinkLocalAddress is round 57's
// sctp-linklocal: an SCTP INIT or a DCCP request to 169.254.169.254 (the
// cloud metadata address: Go counts 169.254.0.0/16 as link-local) or to
// fe80::1 reached egress0 and was dropped as the kernel's housekeeping,
// with no audit line. Only ICMPv6 to a multicast or link-local address
// is housekeeping (neighbour discovery).
func TestParsePacketAuditsAnyProtocolToALinkLocalAddress(t *testing.T) {
	ipv4 := func(proto byte, dst [4]byte) []byte {
		p := make([]byte, 40)
		p[0], p[3], p[8], p[9] = 0x45, 40, 64, proto
		copy(p[12:16], []byte{192, 0, 0, 8})
		copy(p[16:20], dst[:])
		return p
	}
	for _, proto := range []byte{132, 33} { // SCTP, DCCP
		a, _, ok := parsePacket(ipv4(proto, [4]byte{169, 254, 169, 254}))
		if !ok || a.Dst.Addr() != netip.MustParseAddr("169.254.169.254") {
			t.Errorf("protocol %d to 169.254.169.254: %+v %v", proto, a, ok)
		}
	}
	ns := make([]byte, 48) // an IPv6 neighbour solicitation to a solicited-node group
	ns[0], ns[5], ns[6], ns[7], ns[40] = 0x60, 8, protoICMPv6, 255, 135
	copy(ns[8:24], netip.MustParseAddr("100::8").AsSlice())
	copy(ns[24:40], netip.MustParseAddr("ff02::1:ff00:1").AsSlice())
	if a, _, ok := parsePacket(ns); ok {
		t.Errorf("a neighbour solicitation was read as an attempt: %+v", a)
	}
}
