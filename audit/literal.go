package audit

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/egressd/egressd/internal/ipv4in6"
)

// LiteralAddr reads the address an IP-literal target stands for, in every
// spelling a resolver or inet_aton reads (the spellings the proxy refuses
// as ip_literal): "a.b.c.d" with or without a trailing dot, shortened
// forms ("127.1", "169.254.43518", one 32-bit number), octal and hex parts,
// "[v6]" with a zone, and the IPv4 address inside an IPv6 address in every
// embedding the policy denies (ipv4in6.Embedded, the policy's own reading:
// mapped, compatible, SIIT, NAT64 well-known, local-use and the operator's
// nat64 prefixes, 6to4 and Teredo). A port is dropped. Folding judges a
// target by this address, never by its raw string, so no spelling of the
// metadata address passes for a name or for an unremarkable address.
func LiteralAddr(target string, nat64 []netip.Prefix) (netip.Addr, bool) {
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
		v4, form := ipv4in6.Embedded(a, nat64)
		if form == ipv4in6.LocalUse {
			// The translator's layout is the operator's: a metadata
			// address in any layout names it.
			for _, r := range ipv4in6.LocalUseReadings(a) {
				if isMetadata(r) {
					return r, true
				}
			}
		}
		if form != ipv4in6.None && v4.IsValid() {
			return v4, true
		}
		return a, true
	}
	return inetAton(strings.TrimSuffix(host, "."))
}

// isMetadata reports whether a is a cloud metadata address (addrGroups).
func isMetadata(a netip.Addr) bool {
	for _, g := range addrGroups {
		if strings.HasPrefix(g.name, "metadata:") && g.prefix.Contains(a) {
			return true
		}
	}
	return false
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
