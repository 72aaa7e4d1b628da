package broker

import (
	"bytes"
	"net/http"
	"slices"
	"strings"

	"github.com/egressd/egressd/internal/secretforms"
)

// The views: the request body as each decoder an origin may apply to it
// reads it. The guard (guard.go) looks for the values in each.

// alphabetView appends to out the bytes of b in the base64 alphabets,
// the URL alphabet's '-' and '_' written as the standard '+' and '/',
// and nothing else: what a lenient decoder (Node's Buffer, Python's
// b64decode) decodes, base64 wrapped at any column (MIME, PEM), with
// junk between its characters, or in both alphabets at once. Only the
// stable pieces of the values' base64 are looked for in it (not the
// values: joined words would make them up from ordinary text). A piece
// is at least MinBase64Piece characters, 48 bits that only the value
// decides (a value of 8 bytes or more has pieces of 10 or more, 60
// bits): text that is not that value's base64 holds one by chance with
// a probability of about 2^-48 per position or less, so a chance match
// (a refusal and a quarantine for nothing) is negligible. One byte in,
// at most one out, no state across reads: a streamed body is viewed
// read by read.
func alphabetView(b, out []byte) []byte {
	n := len(out)
	out = slices.Grow(out, len(b))[:n+len(b)]
	for _, c := range b {
		// Branch-free: every byte is written, and kept only if in the
		// alphabet (the next one overwrites it otherwise).
		v := inAlphabet[c]
		out[n] = v
		n += int((v | -v) >> 7)
	}
	return out[:n]
}

// inAlphabet maps each byte of the base64 alphabets to what alphabetView
// writes for it, and every other byte to 0.
var inAlphabet = func() (t [256]byte) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") {
		t[c] = c
	}
	t['-'], t['_'] = '+', '/'
	return t
}()

// formDecoder decodes application/x-www-form-urlencoded bytes as they
// stream: %XX as the byte, '+' as a space, anything else (a '%' not
// followed by two hex digits included) as it is. Its state is the escape
// begun at the end of the last read.
type formDecoder struct {
	pending []byte // "%" or "%X", awaiting the rest of an escape
}

// flushed appends what the decoder gives if the data ends now: an escape
// begun and not finished, as it is (mimeView).
func (d *formDecoder) flushed(out []byte) []byte { return append(out, d.pending...) }

func (d *formDecoder) decode(b, out []byte) []byte {
	for len(b) > 0 {
		if len(d.pending) == 0 {
			// Bytes up to the next '%' or '+' are themselves: copied at
			// memory speed, not one by one.
			k := bytes.IndexAny(b, "%+")
			if k < 0 {
				return append(out, b...)
			}
			out = append(out, b[:k]...)
			b = b[k:]
		}
		c := b[0]
		b = b[1:]
		if len(d.pending) > 0 {
			if !isHex(c) {
				out = append(out, d.pending...)
				d.pending = d.pending[:0]
			} else if len(d.pending) == 2 {
				out = append(out, unhex(d.pending[1])<<4|unhex(c))
				d.pending = d.pending[:0]
				continue
			} else {
				d.pending = append(d.pending, c)
				continue
			}
		}
		switch c {
		case '%':
			d.pending = append(d.pending, c)
		case '+':
			out = append(out, ' ')
		default:
			out = append(out, c)
		}
	}
	return out
}

// mimeParts reports whether a body with header h holds MIME parts, where a
// part may carry its own Content-Transfer-Encoding (multipart/*, message/*):
// the bodies an origin's parser decodes quoted-printable in. Other bodies
// are not read that way: the view costs the guard about as much again,
// and no parser applies a part's transfer encoding without parts.
// Every Content-Type field counts (origins differ on which of two they
// take), and the type is looked for anywhere in it: a media-type parser
// trims more than blanks (Go's drops a leading U+00A0 or U+0085, round 32).
func mimeParts(h http.Header) bool {
	for _, v := range h.Values("Content-Type") {
		ct := strings.ToLower(v)
		if strings.Contains(ct, "multipart/") || strings.Contains(ct, "message/") {
			return true
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// decodedViews are s as written and as the parsers of a request's target
// and header fields may decode it: percent-decoded (repeatedly,
// secretforms), form-decoded, and through every body view (bodyViews).
func decodedViews(s string, forms []valueForm) []string {
	var form formDecoder
	views := []string{s, secretforms.PercentDecoded(s), string(form.decode([]byte(s), nil))}
	for _, v := range bodyViews(forms) {
		views = append(views, string(v.flushed(v.decode([]byte(s), nil))))
	}
	return views
}
