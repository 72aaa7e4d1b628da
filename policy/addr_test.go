package policy

import (
	"net/netip"
	"testing"
)

// TestCheckAddrDeniedRanges covers every denied range and both sides of its
// boundaries, and the IPv6 forms that smuggle an IPv4 address.
func TestCheckAddrDeniedRanges(t *testing.T) {
	p := NewPolicy(testManifest(t), nil, PolicyOptions{})
	cases := []struct {
		name, addr string
		denied     bool
	}{
		{"this_network_first", "0.0.0.0", true},
		{"this_network_last", "0.255.255.255", true},
		{"public_after_this_network", "1.0.0.0", false},
		{"private_10_first", "10.0.0.0", true},
		{"private_10_last", "10.255.255.255", true},
		{"public_before_10", "9.255.255.255", false},
		{"public_after_10", "11.0.0.0", false},
		{"cgnat_first", "100.64.0.0", true},
		{"cgnat_last", "100.127.255.255", true},
		{"public_before_cgnat", "100.63.255.255", false},
		{"public_after_cgnat", "100.128.0.0", false},
		{"loopback", "127.0.0.1", true},
		{"loopback_last", "127.255.255.255", true},
		{"public_after_loopback", "128.0.0.0", false},
		{"link_local_metadata", "169.254.169.254", true},
		{"link_local_first", "169.254.0.0", true},
		{"public_after_link_local", "169.255.0.0", false},
		{"private_172_first", "172.16.0.0", true},
		{"private_172_last", "172.31.255.255", true},
		{"public_before_172", "172.15.255.255", false},
		{"public_after_172", "172.32.0.0", false},
		{"ietf_protocol_assignments", "192.0.0.8", true},
		{"test_net_1", "192.0.2.1", true},
		{"public_after_test_net_1", "192.0.3.0", false},
		{"6to4_relay_anycast", "192.88.99.1", true},
		{"private_192_168", "192.168.1.1", true},
		{"public_before_192_168", "192.167.255.255", false},
		{"public_after_192_168", "192.169.0.0", false},
		{"benchmarking_first", "198.18.0.0", true},
		{"benchmarking_last", "198.19.255.255", true},
		{"public_after_benchmarking", "198.20.0.0", false},
		{"test_net_2", "198.51.100.7", true},
		{"test_net_3", "203.0.113.9", true},
		{"multicast", "224.0.0.1", true},
		{"reserved", "240.0.0.1", true},
		{"broadcast", "255.255.255.255", true},
		{"public_before_multicast", "223.255.255.255", false},
		{"azure_wireserver", "168.63.129.16", true},
		{"public_next_to_wireserver", "168.63.129.17", false},
		{"public_v4", "93.184.216.34", false},
		{"v6_unspecified", "::", true},
		{"v6_loopback", "::1", true},
		{"v6_unique_local", "fd00::1", true},
		{"v6_unique_local_first", "fc00::", true},
		{"v6_link_local", "fe80::1", true},
		{"v6_site_local", "fec0::1", true},
		{"v6_multicast", "ff02::1", true},
		{"v6_discard", "100::1", true},
		{"v6_documentation", "2001:db8::1", true},
		{"v6_documentation_3fff", "3fff::1", true},
		{"v6_6to4", "2002:7f00:1::", true},
		{"v6_teredo", "2001:0:4136:e378:8000:63bf:3fff:fdd2", true},
		{"v6_public", "2606:4700::1111", false},
		{"v6_public_after_ietf_assignments", "2001:200::1", false},
		{"v6_ietf_protocol_assignments_pcp_anycast", "2001:1::1", true},
		{"v6_benchmarking", "2001:2::1", true},
		{"v6_benchmarking_last", "2001:2:0:ffff:ffff:ffff:ffff:ffff", true},
		{"v6_amt", "2001:3::1", true},
		{"v6_as112_delegation", "2001:4:112::1", true},
		{"v6_orchid_deprecated", "2001:10::1", true},
		{"v6_orchid_v2", "2001:20::1", true},
		{"v6_orchid_v2_last", "2001:2f:ffff:ffff:ffff:ffff:ffff:ffff", true},
		{"v6_drone_remote_id_dets", "2001:30::1", true},
		{"v6_ietf_assignments_last", "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", true},
		{"v6_as112_direct_delegation", "2620:4f:8000::1", true},
		{"v6_public_next_to_as112", "2620:4f:8001::1", false},
		{"v6_srv6_sids", "5f00::1", true},
		{"v6_dummy_prefix", "100:0:0:1::1", true},
		{"v6_unallocated_outside_2000_3", "4000::1", true},
		{"v6_unallocated_below_2000_3", "1fff:ffff::1", true},
		{"v6_global_unicast_afrinic", "2c0f:fb50::1", false},
		{"v4_mapped_metadata", "::ffff:169.254.169.254", true},
		{"v4_mapped_loopback", "::ffff:127.0.0.1", true},
		{"v4_mapped_public", "::ffff:93.184.216.34", false},
		{"v4_translated_loopback", "::ffff:0:127.0.0.1", true},
		{"v4_translated_public", "::ffff:0:93.184.216.34", false},
		{"v4_compatible_loopback", "::127.0.0.1", true},
		{"v4_compatible_private", "::10.0.0.1", true},
		{"nat64_metadata", "64:ff9b::169.254.169.254", true},
		{"nat64_public", "64:ff9b::93.184.216.34", false},
		{"nat64_local_use_private", "64:ff9b:1::10.0.0.1", true},
		{"zone_id_ignored", "fe80::1%eth0", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := p.CheckAddr(netip.MustParseAddr(tc.addr))
			if d.Verdict.Permits() == tc.denied {
				t.Fatalf("CheckAddr(%s) = %v %s, want denied=%v", tc.addr, d.Verdict, d.Reason, tc.denied)
			}
			if tc.denied && d.Reason != PrivateAddress {
				t.Fatalf("reason %s, want private_address", d.Reason)
			}
		})
	}
}

func TestCheckAddrExemptionsAndOperatorCIDRs(t *testing.T) {
	p := NewPolicy(testManifest(t), nil, PolicyOptions{
		Exemptions: Exemptions{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		Deny:       OperatorDeny{CIDRs: []netip.Prefix{netip.MustParsePrefix("127.9.0.0/16"), netip.MustParsePrefix("93.184.0.0/16")}},
		NAT64:      []netip.Prefix{netip.MustParsePrefix("2001:db8:64::/96")},
		Host:       NewHostAddrs([]netip.Addr{netip.MustParseAddr("203.0.114.5")}),
	})
	cases := []struct {
		name, addr string
		want       Decision
	}{
		{"allow_private_exempts_loopback", "127.0.0.5", Decision{Verdict: Allow, Reason: Allowed, Exemption: "allow_private:127.0.0.0/8"}},
		{"allow_private_exempts_mapped_form", "::ffff:127.0.0.5", Decision{Verdict: Allow, Reason: Allowed, Exemption: "allow_private:127.0.0.0/8"}},
		{"allow_private_does_not_reach_metadata", "169.254.169.254", Decision{Reason: PrivateAddress}},
		{"operator_cidr_beats_exemption", "127.9.0.1", Decision{Reason: OperatorDenied, Rule: "deny.cidrs: 127.9.0.0/16"}},
		{"operator_cidr_on_public", "93.184.216.34", Decision{Reason: OperatorDenied, Rule: "deny.cidrs: 93.184.0.0/16"}},
		{"configured_nat64_prefix", "2001:db8:64::a9fe:a9fe", Decision{Reason: PrivateAddress}},
		{"proxy_host_own_address", "203.0.114.5", Decision{Reason: PrivateAddress}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.CheckAddr(netip.MustParseAddr(tc.addr)); got != tc.want {
				t.Fatalf("CheckAddr(%s) = %+v, want %+v", tc.addr, got, tc.want)
			}
		})
	}
}

func TestCheckAddrAllocatesNothing(t *testing.T) {
	p := NewPolicy(testManifest(t), nil, PolicyOptions{})
	a, b := netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("::ffff:10.0.0.1")
	if n := testing.AllocsPerRun(1000, func() { p.CheckAddr(a); p.CheckAddr(b) }); n != 0 {
		t.Fatalf("CheckAddr allocates %v", n)
	}
}
