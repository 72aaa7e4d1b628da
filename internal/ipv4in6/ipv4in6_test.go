package ipv4in6

import (
	"net/netip"
	"testing"
)

// TestEmbeddedReadsEveryFormThePolicyDenies: one reading for the policy
// and the audit log (issue 18, break 2: the log grouped ::ffff:0:a9fe:a9fe,
// which the policy denied as 169.254.169.254, as an unremarkable address).
func TestEmbeddedReadsEveryFormThePolicyDenies(t *testing.T) {
	operator := []netip.Prefix{netip.MustParsePrefix("2a0b:4f00::/32"), netip.MustParsePrefix("64:ff9b:1:1::/64")}
	for _, tc := range []struct {
		name, addr, v4 string
		form           Form
	}{
		{"mapped", "::ffff:169.254.169.254", "169.254.169.254", Mapped},
		{"compatible", "::a9fe:a9fe", "169.254.169.254", Compatible},
		{"compatible_small", "::2", "0.0.0.2", Compatible},
		{"siit_translated", "::ffff:0:a9fe:a9fe", "169.254.169.254", Translated},
		{"nat64_well_known", "64:ff9b::a9fe:a9fe", "169.254.169.254", NAT64},
		{"nat64_operator_32", "2a0b:4f00:a9fe:a9fe::808:808", "169.254.169.254", NAT64},
		{"nat64_operator_u_octet_set", "2a0b:4f00:808:808:ff00::", "invalid IP", NAT64},
		{"nat64_operator_inside_local_use", "64:ff9b:1:1:a9:fea9:fe00:0", "169.254.169.254", NAT64},
		{"nat64_local_use_48_layout", "64:ff9b:1:a9fe:a9:fe00::", "169.254.169.254", LocalUse},
		{"6to4", "2002:a9fe:a9fe::1", "169.254.169.254", SixToFour},
		{"teredo_obfuscated_client", "2001:0:4136:e378:8000:63bf:5601:5601", "169.254.169.254", Teredo},
		{"unspecified", "::", "invalid IP", None},
		{"loopback", "::1", "invalid IP", None},
		{"public_v6", "2606:4700::1111", "invalid IP", None},
		{"v4", "169.254.169.254", "invalid IP", None},
		{"zone_ignored", "::ffff:0:a9fe:a9fe%eth0", "169.254.169.254", Translated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v4, form := Embedded(netip.MustParseAddr(tc.addr), operator)
			if v4.String() != tc.v4 || form != tc.form {
				t.Fatalf("Embedded(%s) = %s, %d; want %s, %d", tc.addr, v4, form, tc.v4, tc.form)
			}
		})
	}
}

// TestOnlyRoutedFormsAreJudgedByTheirIPv4: 6to4, Teredo and local-use
// NAT64 are denied whole by the policy; judging them by what they embed
// would let 2002:808:808:: through as 8.8.8.8.
func TestOnlyRoutedFormsAreJudgedByTheirIPv4(t *testing.T) {
	for f, want := range map[Form]bool{None: false, Mapped: true, Compatible: true, Translated: true, NAT64: true, LocalUse: false, SixToFour: false, Teredo: false} {
		if f.JudgedByIPv4() != want {
			t.Errorf("form %d JudgedByIPv4 = %v", f, !want)
		}
	}
}

// TestLocalUseReadingsCoverEveryLayoutInsideThePrefix: the log cannot know
// the operator's layout inside 64:ff9b:1::/48, so it reads each.
func TestLocalUseReadingsCoverEveryLayoutInsideThePrefix(t *testing.T) {
	for addr, want := range map[string]string{
		"64:ff9b:1:a9fe:a9:fe00::":   "169.254.169.254", // /48
		"64:ff9b:1:a9:fe:a9fe::":     "169.254.169.254", // /56
		"64:ff9b:1:0:a9:fea9:fe00:0": "169.254.169.254", // /64
		"64:ff9b:1::a9fe:a9fe":       "169.254.169.254", // /96
		"64:ff9b:2::a9fe:a9fe":       "",                // not local use
	} {
		found := false
		for _, r := range LocalUseReadings(netip.MustParseAddr(addr)) {
			found = found || r.String() == want
		}
		if found != (want != "") {
			t.Errorf("LocalUseReadings(%s) = %v, want one of them %q", addr, LocalUseReadings(netip.MustParseAddr(addr)), want)
		}
	}
}
