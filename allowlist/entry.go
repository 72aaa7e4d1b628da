package allowlist

import (
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// Entry is one compiled manifest entry: an exact host, or a wildcard that
// matches exactly one more label in front of its base ("*.cdn.x.y" matches
// "a.cdn.x.y" only), as TLS wildcard certificates do.
type Entry struct {
	Base     Name
	Wildcard bool
}

// String returns the entry as a manifest writes it: "api.x.y" or "*.cdn.x.y".
func (e Entry) String() string {
	if e.Wildcard {
		return "*." + e.Base.s
	}
	return e.Base.s
}

// Matches reports whether the entry admits n. It is the obviously correct
// reference the [Matcher] is tested against.
func (e Entry) Matches(n Name) bool {
	if e.Wildcard {
		return n.Parent() == e.Base.s && !n.IsZero()
	}
	return n == e.Base
}

// DefaultWildcardDNSServices are services that resolve a name to whatever IP
// address is written into it (10-0-0-1.nip.io → 10.0.0.1). Allowing one is
// an IP-literal allowlist in disguise.
var DefaultWildcardDNSServices = []string{"nip.io", "sslip.io", "traefik.me", "localtest.me", "lvh.me", "xip.io", "nip.direct", "localhost.direct"}

// Rules holds what an operator can add to the entry rules. The zero Rules
// applies the built-in rules only.
type Rules struct {
	// WildcardDNSServices extends DefaultWildcardDNSServices. Entries must be
	// canonical names; names under any of them are refused.
	WildcardDNSServices []string
}

// EntryError is a refused manifest entry. Error() is the message part of a
// manifest problem: what is wrong, with the input quoted.
type EntryError struct {
	In  string
	Msg string
}

func (e *EntryError) Error() string { return fmt.Sprintf("%s (%q)", e.Msg, capString(e.In, 253)) }

// ParseEntry parses one manifest network entry with the built-in rules.
func ParseEntry(s string) (Entry, []string, error) { return (*Rules)(nil).ParseEntry(s) }

// ParseEntry parses one manifest network entry, written by a person: a
// hostname, or "*." and a hostname. It returns the entry, warnings for
// anything it normalised (case, a trailing dot, a Unicode name turned into
// its A-label), and an error for anything refused.
//
// Unicode is handled with IDNA's Registration profile, which refuses rather
// than maps: a fullwidth letter, a soft hyphen or "①" is an error, because a
// name that only becomes valid by mapping is not the name the author wrote.
func (r *Rules) ParseEntry(s string) (Entry, []string, error) {
	in := s
	fail := func(msg string) (Entry, []string, error) { return Entry{}, nil, &EntryError{In: in, Msg: msg} }
	var warn []string

	if msg := shapeProblem(s); msg != "" {
		return fail(msg)
	}
	if lower := lowerASCII(s); lower != s {
		warn = append(warn, fmt.Sprintf("normalised to lower case %q", lower))
		s = lower
	}
	if strings.HasSuffix(s, ".") && s != "." && s != "*." {
		s = s[:len(s)-1]
		warn = append(warn, fmt.Sprintf("trailing dot removed: %q", s))
	}

	wildcard := false
	switch {
	case s == "*" || s == "*.":
		return fail("a wildcard alone would allow every host; list the hosts you need")
	case strings.HasPrefix(s, "*."):
		wildcard, s = true, s[2:]
	}
	if strings.Contains(s, "*") {
		return fail("a wildcard is allowed only as the whole first label (\"*.cdn.example.com\")")
	}
	if isIPAddress(s) || (s != "" && endsInNumber(s)) {
		return fail("bare IP addresses are not allowed")
	}

	if msg := deviationProblem(s); msg != "" {
		return fail(msg)
	}
	name, err := toALabel(s)
	if err != nil {
		return fail(err.Error())
	}
	if name != s {
		warn = append(warn, fmt.Sprintf("written as its A-label %q", name))
	}
	if msg := checkLDH(name); msg != "" {
		return fail(msg)
	}
	if endsInNumber(name) {
		return fail("bare IP addresses are not allowed")
	}
	n := Name{s: name}
	if msg := r.nameProblem(n, wildcard); msg != "" {
		return fail(msg)
	}
	return Entry{Base: n, Wildcard: wildcard}, warn, nil
}

// shapeProblem catches URL pieces and IP brackets before any name parsing, so
// the author is told what they wrote rather than "invalid character".
func shapeProblem(s string) string {
	switch {
	case s == "":
		return "empty entry"
	case strings.TrimSpace(s) != s || strings.ContainsAny(s, " \t\r\n"):
		return "whitespace is not allowed"
	case strings.Contains(s, "://"):
		return "no scheme: write the hostname only (traffic is always https)"
	case strings.HasPrefix(s, "["):
		return "bare IP addresses are not allowed"
	case strings.ContainsAny(s, "/?#"):
		return "no path, query or fragment: write the hostname only"
	case strings.Contains(s, "@"):
		return "no userinfo: write the hostname only"
	case strings.Contains(s, "%"):
		return "percent-encoding is not allowed: write the hostname itself"
	case strings.Contains(s, ":"):
		if isIPAddress(s) {
			return "bare IP addresses are not allowed"
		}
		return "no port: the port is always 443 unless the operator exempts another"
	}
	return ""
}

// deviations are the code points IDNA2003 (and UTS 46 transitional
// processing) maps away while IDNA2008 keeps them: "faß.example" is
// fass.example to Python's idna codec or java.net.IDN, and
// xn--fa-hia.example to egressd, so the entry names two hosts.
var deviations = map[rune]struct{ name, other string }{
	'\u00df': {"ß (U+00DF)", "\"ss\""},
	'\u03c2': {"ς (U+03C2)", "\"σ\""},
	'\u200c': {"ZERO WIDTH NON-JOINER (U+200C)", "the name without it"},
	'\u200d': {"ZERO WIDTH JOINER (U+200D)", "the name without it"},
}

// deviationProblem refuses an entry holding an IDNA deviation character.
// Written as its A-label (or with the other spelling), it has one meaning.
func deviationProblem(s string) string {
	for _, r := range s {
		if d, ok := deviations[r]; ok {
			return "holds " + d.name + ", which IDNA2003 tools read as another host than IDNA2008 tools do; write the A-label (xn--…) or " + d.other + " explicitly"
		}
	}
	return ""
}

func isIPAddress(s string) bool {
	_, err := netip.ParseAddr(strings.Trim(s, "[]"))
	return err == nil
}

// toALabel converts s to its A-label form with IDNA's Registration profile,
// which refuses code points it would have to map. An "xn--" label must
// round-trip: decoding and re-encoding gives the same bytes.
func toALabel(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("empty host")
	}
	a, err := idna.Registration.ToASCII(s)
	if err != nil {
		return "", fmt.Errorf("not a valid hostname under IDNA registration rules (%v)", stripIDNAPrefix(err))
	}
	if strings.Contains(a, "xn--") {
		u, err := idna.Registration.ToUnicode(a)
		if err != nil {
			return "", fmt.Errorf("punycode label does not decode (%v)", stripIDNAPrefix(err))
		}
		back, err := idna.Registration.ToASCII(u)
		if err != nil || back != a {
			return "", fmt.Errorf("punycode label does not round-trip")
		}
	}
	return a, nil
}

func stripIDNAPrefix(err error) string { return strings.TrimPrefix(err.Error(), "idna: ") }

// nameProblem applies the rules that depend on where a name sits in the DNS:
// single-label and special-use names, wildcard-DNS services, and wildcards
// over public suffixes.
func (r *Rules) nameProblem(n Name, wildcard bool) string {
	if wildcard {
		if suffix, _ := publicsuffix.PublicSuffix(n.s); suffix == n.s {
			return "wildcard covers a public suffix, where anyone can register names; list each host you need"
		}
		// A PSL wildcard rule (*.kawasaki.jp) makes every child of the base
		// a public suffix. Probe with a child label no exception rule names.
		probe := "egressd-psl-probe." + n.s
		if suffix, _ := publicsuffix.PublicSuffix(probe); suffix == probe {
			return "wildcard covers public suffixes (each child is one), where anyone can register names; list each host you need"
		}
	}
	if n.IsSingleLabel() {
		return "single-label names never reach the public internet; use the full hostname"
	}
	if n.IsSpecialUse() {
		return "special-use names (localhost, local, internal, arpa, …) never reach the public internet"
	}
	if svc := r.wildcardDNSService(n); svc != "" {
		return fmt.Sprintf("%s resolves any IP address written into the name, so it is an IP allowlist in disguise", svc)
	}
	return ""
}

func (r *Rules) wildcardDNSService(n Name) string {
	for _, svc := range DefaultWildcardDNSServices {
		if hasDomainSuffix(n.s, svc) {
			return svc
		}
	}
	if r == nil {
		return ""
	}
	for _, svc := range r.WildcardDNSServices {
		if hasDomainSuffix(n.s, svc) {
			return svc
		}
	}
	return ""
}
