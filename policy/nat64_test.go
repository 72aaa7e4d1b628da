package policy

import (
	"net/netip"
	"testing"
)

// TestNAT64LocalUsePrefixIsDeniedWhole is issue 13.7's address: the RFC 8215
// local-use /48 holding 169.254.169.254 where an RFC 6052 /48 layout puts
// it, with 8.8.8.8 in the last 32 bits that used to be read. Translators
// in that prefix are the operator's own, so all of it is denied.
func TestNAT64LocalUsePrefixIsDeniedWhole(t *testing.T) {
	p := NewPolicy(testManifest(t), nil, PolicyOptions{})
	cases := []struct {
		name, addr string
		denied     bool
	}{
		{"local_use_48_layout_holding_metadata", "64:ff9b:1:a9fe:a9:fe00:808:808", true},
		{"local_use_public_in_last_32_bits", "64:ff9b:1::8.8.8.8", true},
		{"local_use_first", "64:ff9b:1::", true},
		{"local_use_last", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", true},
		// Outside every NAT64 prefix and outside 2000::/3: reserved space,
		// denied since issue 17.3 whatever its tail holds.
		{"just_after_local_use_reserved_space", "64:ff9b:2::808:808", true},
		{"well_known_96_metadata", "64:ff9b::169.254.169.254", true},
		{"well_known_96_public", "64:ff9b::8.8.8.8", false},
		{"just_after_well_known_96_reserved_space", "64:ff9b:0:0:1::a9fe:a9fe", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := p.CheckAddr(netip.MustParseAddr(tc.addr))
			if d.Verdict.Permits() == tc.denied {
				t.Fatalf("CheckAddr(%s) = %v %s, want denied=%v", tc.addr, d.Verdict, d.Reason, tc.denied)
			}
		})
	}
}

// TestConfiguredNAT64PrefixesAreReadByTheirLength: RFC 6052 section 2.2
// puts the IPv4 address right after a /32../56 prefix, skipping the
// u-octet (bits 64-71), and after it for /64. Reading the last 32 bits
// instead let 169.254.169.254 through behind a public-looking tail, and
// refused a public address behind a private-looking tail.
func TestConfiguredNAT64PrefixesAreReadByTheirLength(t *testing.T) {
	cases := []struct {
		name, prefix, addr string
		denied             bool
	}{
		{"slash32_metadata_behind_public_tail", "2a0b:4f00::/32", "2a0b:4f00:a9fe:a9fe::808:808", true},
		{"slash32_public_behind_private_tail", "2a0b:4f00::/32", "2a0b:4f00:808:808::a00:1", false},
		{"slash32_u_octet_set", "2a0b:4f00::/32", "2a0b:4f00:808:808:ff00::", true},
		{"slash32_just_outside", "2a0b:4f00::/32", "2a0b:4f01:a9fe:a9fe::808:808", false},
		{"slash40_metadata_behind_public_tail", "2a0b:4f00:100::/40", "2a0b:4f00:1a9:fea9:fe:0:808:808", true},
		{"slash40_public_behind_private_tail", "2a0b:4f00:100::/40", "2a0b:4f00:108:808:8:0:a00:1", false},
		{"slash40_u_octet_set", "2a0b:4f00:100::/40", "2a0b:4f00:108:808:ff08::", true},
		{"slash40_just_outside", "2a0b:4f00:100::/40", "2a0b:4f00:2a9:fea9:fe:0:808:808", false},
		{"slash48_metadata_behind_public_tail", "2a0b:4f00:122::/48", "2a0b:4f00:122:a9fe:a9:fe00:808:808", true},
		{"slash48_public_behind_private_tail", "2a0b:4f00:122::/48", "2a0b:4f00:122:808:8:800:a00:1", false},
		{"slash48_u_octet_set", "2a0b:4f00:122::/48", "2a0b:4f00:122:808:ff08:800::", true},
		{"slash48_just_outside", "2a0b:4f00:122::/48", "2a0b:4f00:123:a9fe:a9:fe00:808:808", false},
		{"slash56_metadata_behind_public_tail", "2a0b:4f00:122:300::/56", "2a0b:4f00:122:3a9:fe:a9fe:808:808", true},
		{"slash56_public_behind_private_tail", "2a0b:4f00:122:300::/56", "2a0b:4f00:122:308:8:808:a00:1", false},
		{"slash56_u_octet_set", "2a0b:4f00:122:300::/56", "2a0b:4f00:122:308:ff08:808::", true},
		{"slash56_just_outside", "2a0b:4f00:122:300::/56", "2a0b:4f00:122:4a9:fe:a9fe:808:808", false},
		{"slash64_loopback_behind_public_tail", "2a0b:4f00:122:344::/64", "2a0b:4f00:122:344:7f:0:108:808", true},
		{"slash64_public", "2a0b:4f00:122:344::/64", "2a0b:4f00:122:344:8:808:800:1", false},
		{"slash64_u_octet_set", "2a0b:4f00:122:344::/64", "2a0b:4f00:122:344:ff08:808:800:0", true},
		{"slash64_just_outside", "2a0b:4f00:122:344::/64", "2a0b:4f00:122:345:7f:0:108:808", false},
		{"slash96_metadata", "2a0b:4f00:122:344:0:1::/96", "2a0b:4f00:122:344:0:1:a9fe:a9fe", true},
		{"slash96_public", "2a0b:4f00:122:344:0:1::/96", "2a0b:4f00:122:344:0:1:808:808", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPolicy(testManifest(t), nil, PolicyOptions{NAT64: []netip.Prefix{netip.MustParsePrefix(tc.prefix)}})
			d := p.CheckAddr(netip.MustParseAddr(tc.addr))
			if d.Verdict.Permits() == tc.denied {
				t.Fatalf("CheckAddr(%s) under %s = %v %s, want denied=%v", tc.addr, tc.prefix, d.Verdict, d.Reason, tc.denied)
			}
		})
	}
}
