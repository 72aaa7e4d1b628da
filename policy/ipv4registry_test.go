package policy

import (
	"net/netip"
	"testing"
)

// ipv4SpecialPurpose is IANA's IPv4 Special-Purpose Address Registry
// (iana-ipv4-special-registry, as updated 2023-05), every entry. egressd
// denies each one whether or not the registry calls it globally reachable:
// none is a place an integration has business reaching over https, and
// their IPv6 twins are denied (deniedV6). Each entry is checked at its
// first and last address.
var ipv4SpecialPurpose = []struct {
	prefix, name string
}{
	{"0.0.0.0/8", "this network (RFC 791)"},
	{"0.0.0.0/32", "this host on this network (RFC 1122)"},
	{"10.0.0.0/8", "private-use (RFC 1918)"},
	{"100.64.0.0/10", "shared address space (RFC 6598)"},
	{"127.0.0.0/8", "loopback (RFC 1122)"},
	{"169.254.0.0/16", "link local (RFC 3927)"},
	{"172.16.0.0/12", "private-use (RFC 1918)"},
	{"192.0.0.0/24", "IETF protocol assignments (RFC 6890)"},
	{"192.0.0.0/29", "IPv4 service continuity prefix (RFC 7335)"},
	{"192.0.0.8/32", "IPv4 dummy address (RFC 7600)"},
	{"192.0.0.9/32", "port control protocol anycast (RFC 7723)"},
	{"192.0.0.10/32", "TURN anycast (RFC 8155)"},
	{"192.0.0.170/32", "NAT64/DNS64 discovery (RFC 8880)"},
	{"192.0.0.171/32", "NAT64/DNS64 discovery (RFC 8880)"},
	{"192.0.2.0/24", "documentation, TEST-NET-1 (RFC 5737)"},
	{"192.31.196.0/24", "AS112-v4 (RFC 7535)"},
	{"192.52.193.0/24", "AMT (RFC 7450)"},
	{"192.88.99.0/24", "deprecated 6to4 relay anycast (RFC 7526)"},
	{"192.88.99.2/32", "6a44-relay anycast address (RFC 6751)"},
	{"192.168.0.0/16", "private-use (RFC 1918)"},
	{"192.175.48.0/24", "direct delegation AS112 service (RFC 7534)"},
	{"198.18.0.0/15", "benchmarking (RFC 2544)"},
	{"198.51.100.0/24", "documentation, TEST-NET-2 (RFC 5737)"},
	{"203.0.113.0/24", "documentation, TEST-NET-3 (RFC 5737)"},
	{"240.0.0.0/4", "reserved (RFC 1112)"},
	{"255.255.255.255/32", "limited broadcast (RFC 919)"},
}

// TestEveryIPv4SpecialPurposeRangeIsRefused: 192.175.48.0/24 (AS112
// direct delegation), 192.31.196.0/24 (AS112-v4) and 192.52.193.0/24 (AMT)
// passed CheckAddr while their IPv6 twins (2620:4f:8000::/48,
// 2001:4:112::/48, 2001:3::/32) were refused. Every registry entry is
// refused private_address at both ends.
func TestEveryIPv4SpecialPurposeRangeIsRefused(t *testing.T) {
	p := NewPolicy(testManifest(t), nil, PolicyOptions{})
	for _, e := range ipv4SpecialPurpose {
		pfx := netip.MustParsePrefix(e.prefix)
		for _, a := range []netip.Addr{pfx.Addr(), lastAddr(pfx)} {
			d := p.CheckAddr(a)
			if d.Verdict.Permits() || d.Reason != PrivateAddress {
				t.Errorf("%s %s (%s): %v %s, want refused private_address", e.prefix, a, e.name, d.Verdict, d.Reason)
			}
		}
	}
	// Their public neighbours stay reachable: the new ranges are no wider
	// than the registry's.
	for _, s := range []string{"192.175.47.255", "192.175.49.0", "192.31.195.255", "192.31.197.0", "192.52.192.255", "192.52.194.0"} {
		if d := p.CheckAddr(netip.MustParseAddr(s)); !d.Verdict.Permits() {
			t.Errorf("public %s refused: %s", s, d.Reason)
		}
	}
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	for i := p.Bits(); i < 32; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	return netip.AddrFrom4(b)
}
