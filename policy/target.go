package policy

import (
	"strings"

	"github.com/egressd/egressd/allowlist"
)

// DecideTarget judges a raw CONNECT request target, exactly as the client
// sent it on the request line ("host:port"). It is the one entry point for
// CONNECT targets, so the proxy and "egressd explain" cannot disagree.
//
// It must be given the raw target, never net/http's r.Host: Go decodes
// %XX escapes into r.Host, which turns "%E2%91%A0" into "①".
func (p *Policy) DecideTarget(raw string) Decision {
	host, port, ok := splitTarget(raw)
	if !ok {
		return Decision{Reason: BadRequest}
	}
	return p.Decide(host, port)
}

// ParseTarget is the canonical host and the port of raw ("host:port"),
// read as DecideTarget reads them, or ok false when they do not parse. It
// names, in the audit log, a target refused before any decision on it (a
// request whose headers egressd cannot parse).
func ParseTarget(raw string) (host allowlist.Name, port uint16, ok bool) {
	h, port, ok := splitTarget(raw)
	if !ok {
		return allowlist.Name{}, 0, false
	}
	host, err := allowlist.ParseWireHost(h, allowlist.HostForm)
	if err != nil {
		return allowlist.Name{}, 0, false
	}
	return host, port, true
}

// splitTarget splits "host:port" strictly. It refuses what no honest client
// sends and what parsers disagree on: no port, an empty port, port 0 or
// above 65535, leading zeros or signs, '%' (escapes and IPv6 zone ids),
// userinfo, '*', paths, and anything outside printable ASCII.
func splitTarget(raw string) (host string, port uint16, ok bool) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c <= ' ' || c >= 0x7f || c == '%' || c == '@' || c == '*' || c == '/' || c == '\\' || c == '?' || c == '#' {
			return "", 0, false
		}
	}
	i := strings.LastIndexByte(raw, ':')
	if i < 0 {
		return "", 0, false
	}
	host, ps := raw[:i], raw[i+1:]
	if host == "" || ps == "" || len(ps) > 5 || ps[0] == '0' {
		return "", 0, false
	}
	n := 0
	for j := 0; j < len(ps); j++ {
		if ps[j] < '0' || ps[j] > '9' {
			return "", 0, false
		}
		n = n*10 + int(ps[j]-'0')
	}
	if n < 1 || n > 65535 {
		return "", 0, false
	}
	if strings.HasPrefix(host, "[") != strings.HasSuffix(host, "]") {
		return "", 0, false
	}
	return host, uint16(n), true
}
