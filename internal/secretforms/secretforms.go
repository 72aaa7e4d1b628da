// Package secretforms lists the forms in which a secret's value may be
// carried inside another string: verbatim, percent-encoded as a URL
// carries it, and base64-encoded as a Basic token or any blob carries it.
// The broker (scrubbing responses) and the sandbox (holding back launcher
// variables) look for the same forms, so they are listed in one place.
package secretforms

import (
	"encoding/base64"
	"html"
	"net/url"
	"strconv"
	"strings"
)

// Form is one way value is written inside a carrier: Bytes, the bytes to
// look for, and How, the words a warning uses ("percent-encoded").
type Form struct {
	Bytes []byte
	How   string
}

// Verbatim, PercentEncoded and Base64Encoded are the Form.How values.
const (
	Verbatim       = "verbatim"
	PercentEncoded = "percent-encoded"
	Base64Encoded  = "base64-encoded"
)

// MinBase64Piece is the shortest stable base64 piece Forms lists. A piece
// of a short value's encoding is a few characters any token may hold by
// chance (base64 "abc" is "YWJj"): looked for, it would hold back
// unrelated variables. The value itself is always listed, however short.
const MinBase64Piece = 8

// Encodings are the base64 alphabets a carrier may use, unpadded: a
// padded encoding only adds '=' after the stable pieces.
var Encodings = []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding}

// Forms returns value's forms, each once: the value; its percent-encodings
// (url.QueryEscape, url.PathEscape, and every byte outside RFC 3986's
// unreserved set as %XX in upper and in lower hex); and the pieces of its
// base64 encodings that only value decides (StableBase64), at each of the
// three alignments in both alphabets, when at least MinBase64Piece long.
// An empty value has no forms.
func Forms(value []byte) []Form {
	if len(value) == 0 {
		return nil
	}
	var out []Form
	seen := map[string]bool{}
	add := func(b []byte, how string) {
		if len(b) > 0 && !seen[string(b)] {
			seen[string(b)] = true
			out = append(out, Form{Bytes: b, How: how})
		}
	}
	add(value, Verbatim)
	s := string(value)
	add([]byte(url.QueryEscape(s)), PercentEncoded)
	add([]byte(url.PathEscape(s)), PercentEncoded)
	add(escapeAll(value, "0123456789ABCDEF"), PercentEncoded)
	add(escapeAll(value, "0123456789abcdef"), PercentEncoded)
	for align := range 3 {
		for _, enc := range Encodings {
			if piece := StableBase64(enc, align, value); len(piece) >= MinBase64Piece {
				add(piece, Base64Encoded)
			}
		}
	}
	return out
}

// escapeAll writes every byte of b outside RFC 3986's unreserved set
// (ALPHA DIGIT - . _ ~) as %XX with hex's digits.
func escapeAll(b []byte, hex string) []byte {
	var out strings.Builder
	for _, c := range b {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			out.WriteByte(c)
			continue
		}
		out.Write([]byte{'%', hex[c>>4], hex[c&15]})
	}
	return []byte(out.String())
}

// StableBase64 is the part of enc's encoding of b, placed align bytes
// into a 3-byte group, that only b's bits decide: the first character
// that mixes a neighbour's bits (2 with align 1, 3 with align 2) and the
// last (unless b ends a group) are cut. It is what an encoding of b
// with anything before and after it always contains.
func StableBase64(enc *base64.Encoding, align int, b []byte) []byte {
	full := make([]byte, align+len(b))
	copy(full[align:], b)
	s := []byte(enc.EncodeToString(full))
	if len(full)%3 != 0 {
		s = s[:len(s)-1]
	}
	skip := [3]int{0, 2, 3}[align]
	if len(s) <= skip {
		return nil
	}
	return s[skip:]
}

// PercentDecoded decodes every valid %XX escape in s, again until nothing
// changes (at most four times: a placeholder escaped twice is decoded by
// some origins), leaving malformed ones: the origin decodes what it can,
// so the check must see what it sees. A decoded '+' stays '+'; no
// placeholder holds a space.
func PercentDecoded(s string) string {
	for range 4 {
		if !strings.Contains(s, "%") {
			return s
		}
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
				b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
				i += 2
				continue
			}
			b.WriteByte(s[i])
		}
		if b.String() == s {
			return s
		}
		s = b.String()
	}
	return s
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// LenientBase64 decodes tok as the most lenient origins do (Node's
// Buffer, Python's b64decode): bytes outside the base64 alphabets are
// skipped, padding is optional, either alphabet. The broker's
// misdirection check must see whatever some origin would; the sandbox's
// launcher check whatever a program could decode.
func LenientBase64(tok string) (string, bool) {
	var clean strings.Builder
	for i := 0; i < len(tok); i++ {
		switch c := tok[i]; {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/':
			clean.WriteByte(c)
		case c == '-':
			clean.WriteByte('+')
		case c == '_':
			clean.WriteByte('/')
		}
	}
	s := clean.String()
	if len(s)%4 == 1 { // a lone trailing character holds no whole byte
		s = s[:len(s)-1]
	}
	raw, err := base64.RawStdEncoding.DecodeString(s)
	return string(raw), err == nil && s != ""
}

// Views bounds: how many transforms deep Views goes, how many texts it
// returns, and how many bytes they hold in all.
const (
	viewDepth    = 3
	maxViews     = 512
	maxViewBytes = 4 << 20
)

// Views returns s and what a program could decode s into, up to viewDepth
// transforms deep, each applied to every view: its blanks removed (base64
// tools wrap at 64 or 76 columns); backslash escapes undone (JSON, C,
// Python, JavaScript); HTML entities and quoted-printable decoded; NUL
// bytes dropped (UTF-16 of ASCII); percent-decoded ('+' kept, and as a
// space); and each run of base64 characters decoded leniently at its four
// first offsets. A value is carried by s if one of these holds one of its
// Forms: a base64'd connection string holding it percent-encoded, a
// .dockerconfigjson of a Basic token, wrapped base64 in a JSON string.
// complete is false when a bound was reached before every view was made:
// the caller must not take s as clear of the value.
func Views(s string) (views []string, complete bool) {
	seen := map[string]bool{s: true}
	views = []string{s}
	total := len(s)
	level := []string{s}
	for depth := 0; depth < viewDepth && len(level) > 0; depth++ {
		var next []string
		for _, v := range level {
			for _, t := range transforms(v) {
				if seen[t] || t == "" {
					continue
				}
				if len(views) == maxViews || total+len(t) > maxViewBytes {
					return views, false
				}
				seen[t] = true
				views = append(views, t)
				total += len(t)
				next = append(next, t)
			}
		}
		level = next
	}
	return views, true
}

// transforms are the texts one step of decoding makes of v.
func transforms(v string) []string {
	decoded := PercentDecoded(v)
	out := []string{strings.Join(strings.Fields(v), ""), backslashUnescaped(v), decoded, strings.ReplaceAll(decoded, "+", " "),
		strings.ReplaceAll(v, "\x00", ""), // UTF-16 of ASCII (PowerShell's -EncodedCommand is base64 of UTF-16LE)
		html.UnescapeString(v), qpDecoded(v)}
	isB64 := func(r rune) bool {
		return r < 0x80 && (r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("+/-_", r))
	}
	for _, run := range strings.FieldsFunc(v, func(r rune) bool { return !isB64(r) }) {
		if len(run) < MinBase64Piece {
			continue
		}
		for off := range 4 {
			if raw, ok := LenientBase64(run[off:]); ok {
				out = append(out, raw)
			}
		}
	}
	return out
}

// backslashUnescaped undoes the backslash escapes of JSON, C, Python and
// JavaScript wherever they appear (\" \\ \/ \b \f \n \r \t, \uXXXX,
// \u{X…}, \xXX, octal \NNN), leaving anything else as it is.
func backslashUnescaped(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '\\' || i+1 == len(v) {
			b.WriteByte(v[i])
			continue
		}
		rest := v[i+1:]
		if n, width, ok := escapedRune(rest); ok {
			if rest[0] == 'x' || rest[0] >= '0' && rest[0] <= '7' {
				b.WriteByte(byte(n)) // a byte, as C and Python write one
			} else {
				b.WriteRune(rune(n))
			}
			i += width
			continue
		}
		switch c := rest[0]; c {
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		default: // \" \\ \/ and any other: the character itself
			b.WriteByte(c)
		}
		i++
	}
	return b.String()
}

// escapedRune reads a numeric escape after a backslash: uXXXX, u{X…}, xXX
// or up to three octal digits. width is how many bytes of rest it took.
func escapedRune(rest string) (n uint64, width int, ok bool) {
	hex := func(s string) (uint64, bool) {
		n, err := strconv.ParseUint(s, 16, 32)
		return n, err == nil && s != ""
	}
	switch {
	case strings.HasPrefix(rest, "u{"):
		if end := strings.IndexByte(rest, '}'); end > 2 && end <= 8 {
			n, ok = hex(rest[2:end])
			return n, end + 1, ok
		}
	case rest[0] == 'u' && len(rest) >= 5:
		n, ok = hex(rest[1:5])
		return n, 5, ok
	case rest[0] == 'x' && len(rest) >= 3:
		n, ok = hex(rest[1:3])
		return n, 3, ok
	case rest[0] >= '0' && rest[0] <= '7':
		width = 1
		for width < 3 && width < len(rest) && rest[width] >= '0' && rest[width] <= '7' {
			width++
		}
		n, err := strconv.ParseUint(rest[:width], 8, 32)
		return n, width, err == nil && n < 256
	}
	return 0, 0, false
}

// qpDecoded decodes quoted-printable's =XX escapes (and drops its soft
// line breaks), leaving anything else as it is.
func qpDecoded(v string) string {
	if !strings.Contains(v, "=") {
		return v
	}
	return PercentDecoded(strings.NewReplacer("=\r\n", "", "=\n", "", "%", "%25", "=", "%").Replace(v))
}
