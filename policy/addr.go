package policy

import (
	"net/netip"

	"github.com/egressd/egressd/internal/ipv4in6"
)

// deniedV4 are IPv4 ranges that are not the public internet: this host, the
// private and shared ranges, link-local (cloud metadata at 169.254.169.254),
// documentation, benchmarking, multicast and reserved space, every other
// entry of IANA's IPv4 Special-Purpose Address Registry (as for IPv6,
// whether or not the registry calls it globally reachable), and Azure's
// WireServer, which sits on a public-looking address.
var deniedV4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("192.88.99.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"),
	// AS112 (RFC 7534, RFC 7535) and AMT (RFC 7450): the IPv4 twins of
	// 2620:4f:8000::/48, 2001:4:112::/48 and 2001:3::/32. AS112 is a sink
	// for misdirected lookups any network may run locally; neither serves
	// https.
	netip.MustParsePrefix("192.31.196.0/24"),
	netip.MustParsePrefix("192.52.193.0/24"),
	netip.MustParsePrefix("192.175.48.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("168.63.129.16/32"),
}

// deniedV6 are IPv6 ranges that are not the public internet: the entries
// of IANA's IPv6 Special-Purpose Address Registry, whether or not the
// registry calls them globally reachable, since none is a place an
// integration has business reaching over https. 6to4 and Teredo are denied
// outright: each tunnels to an IPv4 address of the sender's choosing.
// Anything outside 2000::/3, the only space IANA allocates for global
// unicast, is denied as well (globalUnicast), so a range the registry adds
// there later is denied before this list learns its name.
var deniedV6 = []netip.Prefix{
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fec0::/10"),
	netip.MustParsePrefix("ff00::/8"),
	netip.MustParsePrefix("100::/64"),       // discard-only (RFC 6666)
	netip.MustParsePrefix("100:0:0:1::/64"), // dummy prefix (RFC 9780)
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("3fff::/20"),
	netip.MustParsePrefix("2002::/16"),
	// IETF protocol assignments (RFC 2928), all of it: Teredo 2001::/32,
	// the PCP, TURN and DNS-SD anycast addresses in 2001:1::/48,
	// benchmarking 2001:2::/48 (RFC 5180), AMT 2001:3::/32, the AS112
	// delegation 2001:4:112::/48 (RFC 7535), ORCHID 2001:10::/28 and
	// ORCHIDv2 2001:20::/28 (RFC 7343), drone DETs 2001:30::/28 (RFC 9374),
	// and whatever the IETF assigns there next.
	netip.MustParsePrefix("2001::/23"),
	// AS112 direct delegation (RFC 7534): a sink for misdirected reverse
	// lookups that any network may run locally; it serves no https.
	netip.MustParsePrefix("2620:4f:8000::/48"),
	netip.MustParsePrefix("5f00::/16"), // SRv6 segment identifiers (RFC 9602)
}

// globalUnicast is 2000::/3, the only IPv6 space IANA allocates for the
// public internet (the other spaces are reserved or special-purpose).
var globalUnicast = netip.MustParsePrefix("2000::/3")

// DefaultNAT64 is the RFC 6052 well-known prefix. Config can add the
// operator's own translator prefixes.
var DefaultNAT64 = []netip.Prefix{ipv4in6.WellKnownNAT64}

// nat64LocalUse is RFC 8215's local-use prefix. Addresses in it reach
// translators inside the operator's own network, with the IPv4 address at a
// place only the operator knows, so all of it is denied.
var nat64LocalUse = ipv4in6.NAT64LocalUse

// NAT64PrefixLengths are the prefix lengths RFC 6052 section 2.2 defines.
var NAT64PrefixLengths = ipv4in6.PrefixLengths

// embeddedV4 returns the IPv4 address an IPv6 address carries, if it is one
// of the forms that route to IPv4: mapped, compatible, translated or NAT64
// (ipv4in6.Embedded, the reading the audit log names addresses by). Such
// an address is judged by the IPv4 address inside it. An address in a
// NAT64 prefix that no RFC 6052 layout explains yields the zero Addr with
// ok true, which every caller denies. 6to4, Teredo and local-use NAT64 are
// not judged by what they embed: deniedV6 and isDenied refuse them whole.
func embeddedV4(a netip.Addr, nat64 []netip.Prefix) (netip.Addr, bool) {
	v4, form := ipv4in6.Embedded(a, nat64)
	if !form.JudgedByIPv4() {
		return netip.Addr{}, false
	}
	return v4, true
}

// isDenied reports whether a is outside the public internet. IPv6 that
// embeds IPv4 is judged by the embedded address, so ::ffff:127.0.0.1 and
// 64:ff9b::a9fe:a9fe are denied like 127.0.0.1 and 169.254.169.254; an
// embedding no layout explains is denied.
func isDenied(a netip.Addr, nat64 []netip.Prefix) bool {
	a = a.WithZone("")
	if nat64LocalUse.Contains(a) {
		return true
	}
	if v4, ok := embeddedV4(a, nat64); ok {
		a = v4
	}
	table := deniedV6
	if a.Is4() {
		table = deniedV4
	} else if !globalUnicast.Contains(a) {
		return true
	}
	for _, p := range table {
		if p.Contains(a) {
			return true
		}
	}
	return !a.IsValid()
}
