// Package termsafe makes text that came from an integration, its manifest
// or an audit log safe to print on a terminal: a control sequence in a host
// name or a manifest key must be shown, never obeyed.
package termsafe

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// String returns s with every byte a terminal could act on replaced by a
// visible escape: C0 controls (tab and newline included), DEL and C1
// controls as \x.., the Unicode bidirectional overrides and isolates
// (which reorder what the reader sees) as \u...., and each byte of invalid
// UTF-8 as \x... Printable Unicode, the space and the backslash itself are
// kept as they are.
func String(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, `\x%02x`, r)
		case bidi(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// clean reports whether s needs no escaping, so the common case allocates
// nothing.
func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// bidi reports the formatting characters that change the display order of
// the text around them (U+061C, U+200E–U+200F, U+202A–U+202E,
// U+2066–U+2069).
func bidi(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}
