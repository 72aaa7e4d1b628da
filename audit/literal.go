package audit

import (
	"net/netip"
	"strconv"
	"strings"
)

// LiteralAddr reads the address an IP-literal target stands for, in every
// spelling a resolver or inet_aton reads (the spellings the proxy refuses
// as ip_literal): "a.b.c.d" with or without a trailing dot, shortened
// forms ("127.1", "169.254.43518", one 32-bit number), octal and hex parts,
// "[v6]" with a zone, and the IPv4 address inside an IPv4-compatible,
// IPv4-mapped or NAT64 (64:ff9b::/96) IPv6 address. A port is dropped.
// Folding judges a target by this address, never by its raw string, so no
// spelling of the metadata address passes for a name.
func LiteralAddr(target string) (netip.Addr, bool) {
	host := target
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		host = host[1:end]
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 && strings.Count(host, ":") == 1 {
		host = host[:i]
	}
	if strings.Contains(host, ":") {
		if i := strings.IndexByte(host, '%'); i >= 0 {
			host = host[:i]
		}
		a, err := netip.ParseAddr(host)
		if err != nil {
			return netip.Addr{}, false
		}
		return embeddedIPv4(a), true
	}
	return inetAton(strings.TrimSuffix(host, "."))
}

// embeddedIPv4 returns the IPv4 address inside an IPv4-mapped,
// IPv4-compatible (::a.b.c.d, not :: or ::1) or NAT64 well-known-prefix
// address, else a itself.
func embeddedIPv4(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if !a.Is6() {
		return a
	}
	b := a.As16()
	var compat, nat64 [12]byte
	nat64[1], nat64[2], nat64[3] = 0x64, 0xff, 0x9b
	var v4 [4]byte
	copy(v4[:], b[12:])
	if [12]byte(b[:12]) == nat64 || ([12]byte(b[:12]) == compat && (v4[0] != 0 || v4[1] != 0)) {
		return netip.AddrFrom4(v4)
	}
	return a
}

// inetAton reads s as inet_aton does: one to four parts, each decimal,
// octal (leading 0) or hex (0x); the last part fills the remaining bytes.
func inetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 || s == "" {
		return netip.Addr{}, false
	}
	var vals []uint64
	for _, p := range parts {
		v, ok := atonPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		vals = append(vals, v)
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		n |= v << (24 - 8*i)
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

func atonPart(p string) (uint64, bool) {
	base := 10
	switch {
	case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
		p, base = p[2:], 16
	case len(p) > 1 && p[0] == '0':
		p, base = p[1:], 8
	}
	if p == "" || strings.ContainsAny(p, "+-_") {
		return 0, false
	}
	v, err := strconv.ParseUint(p, base, 64)
	return v, err == nil && v <= 1<<32-1
}
