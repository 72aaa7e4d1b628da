package policy

import (
	"net/netip"
	"strings"
	"testing"
)

// TestAllowPrivateCoveringTheHostsOwnAddressIsWarnedAbout: a lab range in
// allow_private that holds the proxy host's own address lifts the
// host-itself check too; a round-3 attacker reached a service bound on
// the host through it while `check --config` said nothing.
func TestAllowPrivateCoveringTheHostsOwnAddressIsWarnedAbout(t *testing.T) {
	cfg := Config{Integrations: []Integration{{
		Manifest:   "/srv/a",
		Exemptions: Exemptions{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}},
	}}}
	_, warns := CheckConfig(cfg, []netip.Addr{netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("10.9.9.9")})
	var got []string
	for _, w := range warns {
		if strings.Contains(w, "own address") {
			got = append(got, w)
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], "192.0.2.2") || !strings.HasPrefix(got[0], "/srv/a: ") {
		t.Fatalf("warnings: %q", warns)
	}
	if _, warns := CheckConfig(cfg, []netip.Addr{netip.MustParseAddr("10.9.9.9")}); strings.Contains(strings.Join(warns, "\n"), "own address") {
		t.Fatalf("warned with no host address in range: %q", warns)
	}
}
