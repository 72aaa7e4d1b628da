package policy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/egressd/egressd/allowlist"
)

// An address that cannot be judged is not connected to: when the host's
// addresses cannot be read, every otherwise public address is refused,
// and the rule says why.
func TestUnknownHostAddressesDenyWhatCannotBeJudged(t *testing.T) {
	h := NewHostAddrs(nil)
	p := NewPolicy(&allowlist.Manifest{ID: "x"}, nil, PolicyOptions{Host: h})
	public := netip.MustParseAddr("203.0.114.9")
	if d := p.CheckAddr(public); !d.Verdict.Permits() {
		t.Fatalf("known addresses: %+v", d)
	}
	h.Set(nil, errors.New("netlink: address family not supported"))
	d := p.CheckAddr(public)
	if d.Verdict.Permits() || d.Reason != PrivateAddress || !strings.Contains(d.Rule, "host addresses unknown") {
		t.Fatalf("unknown addresses: %+v", d)
	}
	h.Set([]netip.Addr{public}, nil)
	if d := p.CheckAddr(public); d.Verdict.Permits() {
		t.Fatalf("an address the host holds now: %+v", d)
	}
}

// A connection whose local and remote addresses are one reached this host,
// whatever the address list said; allow_private can still exempt it.
func TestADialThatReachedThisHostIsRefused(t *testing.T) {
	a := netip.MustParseAddr("203.0.114.5")
	p := NewPolicy(&allowlist.Manifest{ID: "x"}, nil, PolicyOptions{})
	if d := p.CheckDialled(a, a); d.Verdict.Permits() || d.Reason != PrivateAddress {
		t.Fatalf("same address: %+v", d)
	}
	if d := p.CheckDialled(netip.MustParseAddr("10.0.0.2"), a); !d.Verdict.Permits() {
		t.Fatalf("different addresses: %+v", d)
	}
	ex := NewPolicy(&allowlist.Manifest{ID: "x"}, nil, PolicyOptions{Exemptions: Exemptions{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("203.0.114.5/32")}}})
	if d := ex.CheckDialled(a, a); !d.Verdict.Permits() || d.Exemption == "" {
		t.Fatalf("exempted: %+v", d)
	}
}

// TestCheckDialledRefusesAConnectionThatLeftFromLoopback: IPv6 to an
// address of a local route (ip -6 route add local PREFIX dev lo) leaves
// from ::1, so local and remote differ and the connection reached the
// host unnoticed. One that left from loopback for an address that is not
// loopback reached this host, whatever the lists said.
func TestCheckDialledRefusesAConnectionThatLeftFromLoopback(t *testing.T) {
	p := NewPolicy(testManifest(t), nil, PolicyOptions{})
	cases := []struct {
		name, local, remote string
		denied              bool
	}{
		{"v6_local_route_from_loopback", "::1", "2a0f:ffff:17::9", true},
		{"v4_from_loopback_to_public", "127.0.0.1", "203.0.114.9", true},
		{"v4_same_address", "203.0.114.9", "203.0.114.9", true},
		{"v4_mapped_loopback_source", "::ffff:127.0.0.1", "203.0.114.9", true},
		{"loopback_to_loopback", "127.0.0.1", "127.0.0.2", false},
		{"ordinary_connection", "192.0.2.10", "203.0.114.9", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := p.CheckDialled(netip.MustParseAddr(tc.local), netip.MustParseAddr(tc.remote))
			if d.Verdict.Permits() == tc.denied {
				t.Fatalf("CheckDialled(%s, %s) = %v %s", tc.local, tc.remote, d.Verdict, d.Rule)
			}
			if tc.denied && (d.Reason != PrivateAddress || !strings.Contains(d.Rule, "this host")) {
				t.Fatalf("reason %s rule %q", d.Reason, d.Rule)
			}
		})
	}
}
