package termsafe

import (
	"fmt"
	"unicode/utf8"
)

// JSON returns the JSON text b with every rune String would escape written
// as a \uXXXX escape (a surrogate pair past U+FFFF): the same JSON value,
// which no terminal or viewer can act on or reorder. encoding/json
// escapes control characters and U+2028/U+2029 itself, but prints a bidi
// override (U+202E), an isolate or a zero-width space raw, so "check
// --json" showed a manifest key reversed. Such runes can only stand
// inside JSON strings, where the escape means the rune itself. Invalid
// UTF-8 is left for encoding/json, which never writes it.
func JSON(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r < 0x80 || (r == utf8.RuneError && size == 1) || !unsafeRune(r):
			out = append(out, b[i:i+size]...)
		case r > 0xffff:
			r -= 0x10000
			out = fmt.Appendf(out, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	return out
}
