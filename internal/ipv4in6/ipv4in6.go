// Package ipv4in6 reads the IPv4 address an IPv6 address carries. It is
// the one reading the policy (which judges such an address by the IPv4
// address inside it) and the audit log (which names and groups it) share,
// so the address a connection was refused for and the address the log
// names it by cannot drift apart: an attempt at 169.254.169.254 spelt
// ::ffff:0:a9fe:a9fe is denied as, and written as, the metadata address.
package ipv4in6

import "net/netip"

// Form is how an IPv6 address carries an IPv4 address.
type Form uint8

const (
	None       Form = iota // no IPv4 address inside
	Mapped                 // ::ffff:a.b.c.d (RFC 4291 §2.5.5.2)
	Compatible             // ::a.b.c.d, deprecated (RFC 4291 §2.5.5.1); not :: or ::1
	Translated             // ::ffff:0:a.b.c.d, SIIT (RFC 2765), which Go's Unmap does not unwrap
	NAT64                  // the well-known 64:ff9b::/96 or an operator's prefix, RFC 6052 layout
	// LocalUse is RFC 8215's 64:ff9b:1::/48 read with the RFC 6052 /48
	// layout. The operator's translators there may use another layout, so
	// the policy denies the whole prefix and never judges by this reading;
	// the audit log uses it to name what was probably meant.
	LocalUse
	SixToFour // 2002:AABB:CCDD::/48 (RFC 3056): a tunnel to the embedded IPv4 address
	Teredo    // 2001::/32 (RFC 4380): the client's IPv4 address, obfuscated (inverted)
)

// JudgedByIPv4 reports whether traffic to an address of this form goes to
// the embedded IPv4 address where the policy can rely on it, so the
// address is judged by it. 6to4 and Teredo tunnel to an address of the
// sender's choosing and local-use NAT64 has no fixed layout: the policy
// denies those outright.
func (f Form) JudgedByIPv4() bool {
	return f == Mapped || f == Compatible || f == Translated || f == NAT64
}

// WellKnownNAT64 is the RFC 6052 well-known prefix; it is always read.
var WellKnownNAT64 = netip.MustParsePrefix("64:ff9b::/96")

// NAT64LocalUse is RFC 8215's local-use prefix.
var NAT64LocalUse = netip.MustParsePrefix("64:ff9b:1::/48")

// PrefixLengths are the NAT64 prefix lengths RFC 6052 section 2.2 defines.
var PrefixLengths = []int{32, 40, 48, 56, 64, 96}

var (
	compatible = netip.MustParsePrefix("::/96")
	translated = netip.MustParsePrefix("::ffff:0:0:0/96")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	teredo     = netip.MustParsePrefix("2001::/32")
	unspec     = netip.IPv6Unspecified()
	loopback   = netip.IPv6Loopback()
)

// Embedded returns the IPv4 address inside a and how it is carried. nat64
// are the operator's translator prefixes (RFC 6052 lengths), read after
// the well-known prefix and before the local-use one. An address in a NAT64 prefix that
// no RFC 6052 layout explains (a non-zero u-octet) yields the zero Addr
// with its form, which the policy denies. A zone is ignored.
func Embedded(a netip.Addr, nat64 []netip.Prefix) (netip.Addr, Form) {
	a = a.WithZone("")
	if a.Is4In6() {
		return a.Unmap(), Mapped
	}
	if !a.Is6() {
		return netip.Addr{}, None
	}
	b := a.As16()
	last32 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	switch {
	case a == unspec || a == loopback:
		return netip.Addr{}, None
	case compatible.Contains(a):
		return last32, Compatible
	case translated.Contains(a):
		return last32, Translated
	}
	if WellKnownNAT64.Contains(a) {
		return last32, NAT64
	}
	for _, p := range nat64 {
		if p.Contains(a) {
			return nat64V4(b, p.Bits()), NAT64
		}
	}
	switch {
	case NAT64LocalUse.Contains(a):
		return nat64V4(b, NAT64LocalUse.Bits()), LocalUse
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), SixToFour
	case teredo.Contains(a):
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}), Teredo
	}
	return netip.Addr{}, None
}

// LocalUseReadings are the IPv4 addresses a local-use NAT64 address
// carries under each RFC 6052 layout that fits inside the /48 (prefix
// lengths 48, 56, 64 and 96), valid ones only. The operator's translator
// uses one of them, which a reader of the log cannot know; the audit log
// uses them to name a metadata address spelt in any of them.
func LocalUseReadings(a netip.Addr) []netip.Addr {
	if !NAT64LocalUse.Contains(a.WithZone("")) {
		return nil
	}
	b := a.As16()
	var out []netip.Addr
	for _, bits := range []int{48, 56, 64, 96} {
		if v4 := nat64V4(b, bits); v4.IsValid() {
			out = append(out, v4)
		}
	}
	return out
}

// nat64V4 reads the IPv4 address where RFC 6052 section 2.2 puts it for a
// prefix of the given length: right after the prefix, skipping bits 64-71
// (the u-octet), which must be zero. Anything else is the zero Addr.
func nat64V4(b [16]byte, bits int) netip.Addr {
	var v4 [4]byte
	switch bits {
	case 32:
		v4 = [4]byte{b[4], b[5], b[6], b[7]}
	case 40:
		v4 = [4]byte{b[5], b[6], b[7], b[9]}
	case 48:
		v4 = [4]byte{b[6], b[7], b[9], b[10]}
	case 56:
		v4 = [4]byte{b[7], b[9], b[10], b[11]}
	case 64:
		v4 = [4]byte{b[9], b[10], b[11], b[12]}
	case 96:
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	default:
		return netip.Addr{}
	}
	if b[8] != 0 {
		return netip.Addr{}
	}
	return netip.AddrFrom4(v4)
}
