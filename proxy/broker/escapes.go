package broker

import (
	"bytes"
	"unicode/utf8"
)

// escapeView reads a body (or a head's field) with the escapes of one of
// the common request formats decoded, as the origin's parser decodes them
// before an application shows a field back (newEscapeView names which):
//   - %XX, '+' kept: a plain percent-decoder (a path, Rack's filename,
//     RFC 2231's filename*=; the form view reads '+' as a space, so a value
//     holding a '+' written with one other byte escaped was in neither,
//     round 44);
//   - %uXXXX: Perl's CGI.pm and old ASP (round 45);
//   - \uXXXX, \", \\, \/: JSON strings;
//   - &#NNN; and &#xHH; (the ';' optional, as HTML5 and Python's
//     html.unescape read them), and the HTML5 names of ASCII punctuation:
//     XML and HTML parsers, formidable's filenames (round 44);
//   - NUL bytes dropped: ASCII text in UTF-16 or UTF-32 is its bytes with
//     NULs between, and Python's json.loads guesses that encoding from the
//     NULs, whatever the Content-Type says (round 45: a guess list posted
//     as UTF-16 JSON came back from Flask and Starlette decoded).
//
// One syntax a view: a view that decoded them all at once read a '%', "&#"
// or "&#x" a JSON parser keeps as text as the start of an escape, which
// swallowed the first characters of the guess behind it (round 46). The
// chains real stacks apply (GraphQL's variables: a JSON string inside
// JSON, or inside a percent-encoded query or form; a cookie-parser's "j:"
// cookies) are views of their own (bodyViews).
type escapeView struct {
	starts   string // the bytes that may begin an escape, or be dropped (NUL: in every syntax)
	percentU bool   // with '%': %uXXXX too (CGI.pm); a view apart, since Werkzeug keeps "%u" as text (round 47)
	pending  []byte // an escape begun, as written (but a number's leading zeros)
	number   bool   // pending is "&#" or "&#x" and digits
	zero     bool   // with number: a leading zero was read
	digits   int    // with number: its significant digits
	val      rune   // with number: its value so far
}

// maxEscape bounds a name held: the longest in htmlASCII fits. A number
// holds at most eight significant digits (past any character).
const maxEscape = 24

// newEscapeView reads the escapes of one syntax: '%' (%XX with '+' kept),
// 'u' (the same and %uXXXX), '\\' (JSON) or '&' (HTML and XML
// references).
func newEscapeView(syntax byte) *escapeView {
	if syntax == 'u' {
		return &escapeView{starts: "\x00%", percentU: true}
	}
	return &escapeView{starts: "\x00" + string(syntax)}
}

// droppedReference reports a numeric character reference the view gives
// as nothing: those Python's html.unescape drops (NUL, the C0 controls
// but the blanks, DEL, noncharacters; round 47: a "&#1;" inside a guess
// split it for the view, not for the origin), and the C1 controls, which
// it maps to cp1252 characters. Dropping is the safe side: a decoder that
// keeps a character there puts a byte no value holds in the value.
func droppedReference(r rune) bool {
	switch {
	case r == 0, r < 0x20 && r != '\t' && r != '\n' && r != '\r' && r != '\f', r >= 0x7f && r <= 0x9f:
		return true
	case r >= 0xfdd0 && r <= 0xfdef, r&0xfffe == 0xfffe && r <= 0x10ffff:
		return true
	}
	return false
}

func (d *escapeView) decode(b, out []byte) []byte {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if len(d.pending) == 0 {
			// Up to the next byte that may begin an escape (or is a NUL),
			// bytes are themselves: copied at memory speed.
			k := bytes.IndexAny(b[i:], d.starts)
			if k < 0 {
				return append(out, b[i:]...)
			}
			out = append(out, b[i:i+k]...)
			i += k
			if c = b[i]; c != 0 {
				d.pending = append(d.pending, c)
			}
			continue
		}
		if c == 0 {
			// A NUL ends the escape, as in any parser of UTF-8 text
			// (round 49: "&#x" NUL "3…" read as a reference hid a guess
			// html.unescape keeps whole); text in UTF-16, escapes and
			// all, is read by the views after nulsDropped (bodyViews).
			out = d.finish(out)
			continue
		}
		var used bool
		if out, used = d.step(c, out); !used {
			i-- // the escape ended before c: read c anew
		}
	}
	return out
}

// flushed appends what the decoders give if the data ends now: a number
// or a legacy name without its ';' is decoded (HTML5), anything else
// begun is given as written.
func (d *escapeView) flushed(out []byte) []byte {
	end := *d
	end.pending = append([]byte(nil), d.pending...)
	return end.finish(out)
}

// step reads c after the escape begun in pending: used says c was part of
// it; when it is not, the escape is given (decoded where it is complete)
// and c is to be read anew.
func (d *escapeView) step(c byte, out []byte) ([]byte, bool) {
	p := d.pending
	switch {
	case d.number:
		hex := d.hexNumber()
		switch {
		case len(p) == 2 && !d.zero && (c == 'x' || c == 'X'): // "&#0x" is "&#0" then 'x' (round 49)
			d.pending = append(d.pending, c)
			return out, true
		case c == '0' && d.digits == 0:
			d.zero = true // leading zeros, any number of them, are read as none
			return out, true
		case d.digits == 8 && (isDigit(c) || hex && isHex(c)):
			return d.give(out), false // past any character
		case hex && isHex(c):
			d.val, d.digits = d.val<<4|rune(unhex(c)), d.digits+1
			d.pending = append(d.pending, c)
			return out, true
		case !hex && isDigit(c):
			d.val, d.digits = d.val*10+rune(c-'0'), d.digits+1
			d.pending = append(d.pending, c)
			return out, true
		case c == ';' && (d.digits > 0 || d.zero):
			return d.finish(out), true
		}
		return d.finish(out), false
	case p[0] == '%' && len(p) == 1:
		if d.percentU && (c == 'u' || c == 'U') || isHex(c) {
			d.pending = append(d.pending, c)
			return out, true
		}
	case p[0] == '%' && p[1] != 'u' && p[1] != 'U': // %X
		if isHex(c) {
			d.pending = d.pending[:0]
			return append(out, unhex(p[1])<<4|unhex(c)), true
		}
	case (p[0] == '%' || p[0] == '\\') && len(p) >= 2: // %uXXXX, \uXXXX
		if isHex(c) {
			if d.pending = append(d.pending, c); len(d.pending) == 6 {
				var r rune
				for _, h := range d.pending[2:] {
					r = r<<4 | rune(unhex(h))
				}
				d.pending = d.pending[:0]
				return utf8.AppendRune(out, r), true
			}
			return out, true
		}
	case p[0] == '\\':
		switch c {
		case 'u':
			d.pending = append(d.pending, c)
			return out, true
		case '"', '\\', '/':
			d.pending = d.pending[:0]
			return append(out, c), true
		}
	case p[0] == '&' && len(p) == 1:
		switch {
		case c == '#':
			d.pending, d.number = append(d.pending, c), true
			return out, true
		case isAlpha(c):
			d.pending = append(d.pending, c)
			return out, true
		}
	case p[0] == '&': // a name
		switch {
		case isAlpha(c) && len(p) < maxEscape:
			d.pending = append(d.pending, c)
			return out, true
		case c == ';':
			if r, ok := htmlASCII[string(p[1:])+";"]; ok {
				d.pending = d.pending[:0]
				return append(out, r...), true
			}
		}
		return d.finish(out), false
	}
	return d.give(out), false
}

// hexNumber reports a numeric escape written in hex (&#x…).
func (d *escapeView) hexNumber() bool {
	return len(d.pending) > 2 && (d.pending[2] == 'x' || d.pending[2] == 'X')
}

// finish ends the escape held where the data or the escape ends: a number
// with digits, or a name HTML5 reads without ';', decoded; else as written.
func (d *escapeView) finish(out []byte) []byte {
	p := d.pending
	switch {
	case d.number && (d.digits > 0 || d.zero):
		if !droppedReference(d.val) {
			out = utf8.AppendRune(out, d.val)
		}
		d.reset()
		return out
	case len(p) > 1 && p[0] == '&' && !d.number:
		// The longest name HTML5 reads without ';' that begins it
		// (html.unescape("&ampe") is "&e").
		name := string(p[1:])
		for n := len(name); n > 1; n-- {
			if r, ok := htmlASCII[name[:n]]; ok {
				out = append(append(out, r...), name[n:]...)
				d.reset()
				return out
			}
		}
	}
	return d.give(out)
}

// give ends the escape held as it was written.
func (d *escapeView) give(out []byte) []byte {
	out = append(out, d.pending...)
	d.reset()
	return out
}

func (d *escapeView) reset() {
	d.pending, d.number, d.zero, d.digits, d.val = d.pending[:0], false, false, 0, 0
}

// htmlASCII are the HTML5 character references whose characters are
// printable ASCII (html.entities.html5), the names without ';' being
// those HTML5 reads so too: one character each, and "fj" (round 48).
var htmlASCII = map[string]string{
	"fjlig;": "fj",
	"excl;":  "!", "QUOT": "\"", "QUOT;": "\"", "quot": "\"", "quot;": "\"", "num;": "#", "dollar;": "$", "percnt;": "%",
	"AMP": "&", "AMP;": "&", "amp": "&", "amp;": "&", "apos;": "'", "lpar;": "(", "rpar;": ")", "ast;": "*", "midast;": "*",
	"plus;": "+", "comma;": ",", "period;": ".", "sol;": "/", "colon;": ":", "semi;": ";", "LT": "<", "LT;": "<", "lt": "<",
	"lt;": "<", "equals;": "=", "GT": ">", "GT;": ">", "gt": ">", "gt;": ">", "quest;": "?", "commat;": "@", "lbrack;": "[",
	"lsqb;": "[", "bsol;": "\\", "rbrack;": "]", "rsqb;": "]", "Hat;": "^", "UnderBar;": "_", "lowbar;": "_",
	"DiacriticalGrave;": "`", "grave;": "`", "lbrace;": "{", "lcub;": "{", "VerticalLine;": "|", "verbar;": "|", "vert;": "|",
	"rbrace;": "}", "rcub;": "}",
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
