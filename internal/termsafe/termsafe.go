// Package termsafe makes text from hostile sources safe to print on a
// terminal. A manifest key, a host name or a log field can hold escape
// sequences that retitle the window, clear the screen or paint a fake
// "ALL CLEAR"; bidi controls can reorder what a reviewer reads. Every
// human-facing output passes such text through String.
package termsafe

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s with every C0 control, DEL, C1 control, Unicode line
// or paragraph separator, space other than U+0020, bidi mark/override/isolate character, invisible
// character (Unicode format, Cf, and default-ignorable code points) and
// invalid UTF-8 byte replaced by a visible escape: \xNN for a byte below
// 0x80 or an invalid byte, \uNNNN for a rune, \UNNNNNNNN past U+FFFF.
// Printable Unicode is kept as it is. Clean text is returned unchanged,
// without allocating, so String of String's output is that output: code
// that escapes twice shows the same text. A backslash is kept, so text can
// hold what looks like an escape: where a name must be told apart from
// every other (a folder in a command, a line a reviewer compares), print
// it with ShellWord, whose output is ASCII and names its bytes alone.
func String(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && unsafeRune(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r) && r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || unsafeRune(r) {
			return i
		}
		i += size
	}
	return -1
}

// Clean reports whether String leaves s as it is.
func Clean(s string) bool { return firstUnsafe(s) < 0 }

// unsafeRune reports the runes a terminal acts on or that reorder text.
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true // C0, DEL, C1
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true // bidi marks, embeddings, overrides and isolates
	case r == 0x2028, r == 0x2029:
		return true // line and paragraph separators: a line break to many viewers
	case r < 0x80:
		return false
	case unicode.Is(unicode.Zs, r):
		return true // no-break and other spaces: "a\u00a0b" would read as "a b"
	case r == 0x2800, r == 0x1d159:
		return true // Braille pattern blank, musical null notehead: drawn as blanks, yet letters
	}
	// Characters a reader cannot see: format characters (zero-width space
	// and joiners, soft hyphen, byte order mark, tags) and the other
	// default-ignorable code points (Hangul fillers, variation selectors),
	// with which "net\u200bwork" reads as "network" and a filler as a blank.
	return unicode.In(r, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}

// Lines returns a writer for a stream of one-line messages (stderr, the
// journal): each Write is one message, and every control character in it
// is escaped, a line break inside it too, so no message can paint the
// terminal or forge a line of its own (a fake checkpoint, a fake "ok"). A
// trailing line break ends the message and is kept.
func Lines(w io.Writer) io.Writer { return lineWriter{w: w} }

// LinesUpTo is Lines with every message cut to max bytes, marked: a log
// sink splits a longer line (journald at 48 KiB, Docker at 16 KiB), and the
// piece after a split begins where the message's author chose (round 39:
// a reload warning listing an author's 3,000 manifest problems was one
// 486 KB line).
func LinesUpTo(w io.Writer, max int) io.Writer { return lineWriter{w: w, max: max} }

type lineWriter struct {
	w   io.Writer
	max int // 0: no cap
}

// cutMark ends a message LinesUpTo cut.
const cutMark = " … (cut)"

func (l lineWriter) Write(p []byte) (int, error) {
	s := string(p)
	body, nl := strings.CutSuffix(s, "\n")
	out := String(body)
	if l.max > 0 && len(out) > l.max {
		cut := l.max - len(cutMark)
		for cut > 0 && !utf8.RuneStart(out[cut]) {
			cut--
		}
		out = out[:cut] + cutMark
	}
	if nl {
		out += "\n"
	}
	if _, err := io.WriteString(l.w, out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// OneLine joins a message of several lines (a manifest's problems, one a
// line) into one line for a one-line stream: "; " between lines, a space
// after a line that ends with a colon. It does not escape: pass the result
// to a Lines writer or to String.
func OneLine(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			continue
		case b.Len() == 0:
		case strings.HasSuffix(b.String(), ":"):
			b.WriteString(" ")
		default:
			b.WriteString("; ")
		}
		b.WriteString(line)
	}
	return b.String()
}
