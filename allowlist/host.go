package allowlist

import (
	"errors"
	"fmt"
	"strings"
)

// Name is a canonical host name: lower-case ASCII, A-label (punycode) form,
// no trailing dot, at most 253 octets in labels of 1–63. Only [ParseEntry]
// and [ParseWireHost] make one, so holding a Name means the checks ran.
//
// The zero Name is not a valid host; IsZero reports it.
type Name struct{ s string }

// String returns the canonical form, e.g. "api.example.com".
func (n Name) String() string { return n.s }

// IsZero reports whether n is the zero Name.
func (n Name) IsZero() bool { return n.s == "" }

// Parent returns the name with its first label removed ("b.c" for "a.b.c"),
// or "" for a single-label name. It does not allocate.
func (n Name) Parent() string {
	if i := strings.IndexByte(n.s, '.'); i >= 0 {
		return n.s[i+1:]
	}
	return ""
}

// IsSingleLabel reports whether n has no dot, like "localhost" or "metadata".
// Such names are resolved through search lists and host files, never the
// public DNS, so an allowlist must not contain them.
func (n Name) IsSingleLabel() bool { return strings.IndexByte(n.s, '.') < 0 }

// specialUse are suffixes whose names never leave a host or a site
// (RFC 6761, RFC 6762, RFC 8375, RFC 9476, and common private TLDs).
// "example" and "test" are special-use too but stay valid: documentation
// and tests need them, and they cannot reach anything real.
var specialUse = []string{"localhost", "local", "internal", "arpa", "home.arpa", "invalid", "onion", "alt", "localdomain"}

// IsSpecialUse reports whether n is, or is under, a special-use suffix.
func (n Name) IsSpecialUse() bool {
	for _, s := range specialUse {
		if hasDomainSuffix(n.s, s) {
			return true
		}
	}
	return false
}

// hasDomainSuffix reports whether name equals suffix or ends in "."+suffix.
func hasDomainSuffix(name, suffix string) bool {
	return name == suffix || (strings.HasSuffix(name, suffix) && len(name) > len(suffix) && name[len(name)-len(suffix)-1] == '.')
}

// WireForm says where a wire name came from, because the forms differ in one
// detail: the trailing dot.
type WireForm uint8

const (
	// HostForm is a CONNECT target or a DNS question; one trailing dot (the
	// root) is allowed and removed.
	HostForm WireForm = iota
	// SNIForm is a TLS server_name, which RFC 6066 §3 says carries no
	// trailing dot.
	SNIForm
)

// ErrIPLiteral is wrapped by every error for a host that is an IP address in
// some spelling. Callers map it to the ip_literal reason.
var ErrIPLiteral = errors.New("IP literal")

// HostError says why a host was refused. It names the parser and quotes
// (and caps) the input, like netip's parse errors.
type HostError struct {
	Func string // "ParseWireHost" or "ParseEntry"
	In   string // the input, capped at 253 bytes
	Msg  string // a fixed phrase
	ip   bool
}

func (e *HostError) Error() string {
	return fmt.Sprintf("allowlist: %s(%q): %s", e.Func, e.In, e.Msg)
}

// Unwrap lets errors.Is(err, ErrIPLiteral) find IP-literal refusals.
func (e *HostError) Unwrap() error {
	if e.ip {
		return ErrIPLiteral
	}
	return nil
}

func wireError(in, msg string, ip bool) *HostError {
	return &HostError{Func: "ParseWireHost", In: capString(in, 253), Msg: msg, ip: ip}
}

// ParseWireHost parses a host chosen by the other side of a connection: a
// CONNECT target's host, a TLS server_name or a DNS name. It accepts ASCII
// letters, digits, '-' and '.' only, lower-cases ASCII, and maps nothing
// else: a byte outside that set is an error, never a translation.
//
// A name whose last label is numeric ("127.1", "0x7f.1", "2130706433") is an
// IP literal, because glibc and browsers read it as one even though
// netip.ParseAddr does not; so is anything with a ':' or '['.
func ParseWireHost(s string, form WireForm) (Name, error) {
	in := s
	if s == "" {
		return Name{}, wireError(in, "empty host", false)
	}
	if s[0] == '[' || strings.IndexByte(s, ':') >= 0 {
		return Name{}, wireError(in, "IPv6 address literal", true)
	}
	if s[len(s)-1] == '.' {
		if form == SNIForm {
			return Name{}, wireError(in, "trailing dot is not allowed in server_name", false)
		}
		s = s[:len(s)-1]
	}
	if msg := checkLDH(s); msg != "" {
		return Name{}, wireError(in, msg, false)
	}
	if endsInNumber(s) {
		return Name{}, wireError(in, "last label is numeric, which resolvers read as an IP address", true)
	}
	return Name{s: lowerASCII(s)}, nil
}

// checkLDH checks s as a dotted name of letter-digit-hyphen labels and
// returns a fixed phrase saying what is wrong, or "" if nothing is.
// Upper-case letters are accepted; the caller lower-cases.
func checkLDH(s string) string {
	if s == "" {
		return "empty host"
	}
	if len(s) > 253 {
		return "name is longer than 253 octets"
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			c := s[i]
			if !isLDH(c) {
				return fmt.Sprintf("character %q is not allowed (ASCII letters, digits, '-' and '.' only)", rune(c))
			}
			continue
		}
		label := s[start:i]
		switch {
		case label == "":
			return "empty label"
		case len(label) > 63:
			return "label is longer than 63 octets"
		case label[0] == '-' || label[len(label)-1] == '-':
			return "label starts or ends with '-'"
		}
		start = i + 1
	}
	return ""
}

func isLDH(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

// endsInNumber is the WHATWG URL standard's "ends in a number" test: the last
// label is all decimal digits (which covers octal), or "0x" followed by hex
// digits. s has no trailing dot.
func endsInNumber(s string) bool {
	last := s[strings.LastIndexByte(s, '.')+1:]
	if last == "" {
		return false
	}
	if allDigits(last) {
		return true
	}
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		for i := 2; i < len(last); i++ {
			c := last[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
		return true
	}
	return false
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// lowerASCII lower-cases ASCII letters only, and allocates only when there is
// an upper-case letter to change.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + ('a' - 'A')
				}
			}
			return string(b)
		}
	}
	return s
}

// capString cuts s to at most n bytes, for echoing hostile input in errors.
func capString(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
