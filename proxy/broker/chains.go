package broker

import (
	"bytes"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// bodyViews are the views every request body is read through besides the
// bytes as they are and form-decoded (guard.go), and the MIME views
// (mimeviews.go): each escape syntax on its own (escapes.go), the chains
// real stacks apply, and PHP's names where a value holds '_'.
func bodyViews(forms []valueForm) []mimeView {
	views := []mimeView{
		newEscapeView('%'),
		newEscapeView('\\'),
		newEscapeView('&'),
		// GraphQL's variables, sent as a JSON string in a query or a form
		// (the GET binding, express-graphql, Apollo) or inside a JSON body,
		// and cookie-parser's "j:" cookies: JSON read after percent-
		// decoding, or twice (round 46).
		&chained{first: newEscapeView('%'), second: newEscapeView('\\')},
		&chained{first: newEscapeView('\\'), second: newEscapeView('\\')},
		// Werkzeug's secure_filename, Flask's documented upload step:
		// NFKD, non-ASCII dropped, of a filename*= (round 46: a fullwidth
		// letter, a zero-width space inside a guess).
		&chained{first: newEscapeView('%'), second: &asciiFolded{}},
	}
	if anyForm(forms, ' ') { // a space is '+' to a form decoder, kept by '%'
		views = append(views, &chained{first: &formDecoder{}, second: newEscapeView('\\')})
	}
	if anyForm(forms, '_') {
		views = append(views, &phpNames{})
	}
	return views
}

// anyForm reports whether some value form holds c.
func anyForm(forms []valueForm, c byte) bool {
	for _, f := range forms {
		if bytes.IndexByte(f.form, c) >= 0 {
			return true
		}
	}
	return false
}

// chained reads the output of first through second.
type chained struct {
	first, second mimeView
	buf           []byte
}

func (c *chained) decode(b, out []byte) []byte {
	c.buf = c.first.decode(b, c.buf[:0])
	return c.second.decode(c.buf, out)
}

// flushed gives what second holds, then what first holds, each as the
// data's end leaves it: first's leftover is an escape begun and not
// finished, given as written, which completes nothing in second.
func (c *chained) flushed(out []byte) []byte {
	return c.first.flushed(c.second.flushed(out))
}

// asciiFolded reads UTF-8 text as NFKD-normalised with everything not
// ASCII dropped: a fullwidth letter is its ASCII letter, a zero-width
// space nothing.
type asciiFolded struct {
	held []byte // a character begun in the last read
	tmp  []byte
}

func (d *asciiFolded) decode(b, out []byte) []byte {
	if len(d.held) > 0 {
		// Complete the character begun last time, then go on.
		for len(b) > 0 && !utf8.FullRune(d.held) {
			d.held, b = append(d.held, b[0]), b[1:]
		}
		if !utf8.FullRune(d.held) {
			return out
		}
		out = d.fold(d.held, out)
		d.held = d.held[:0]
	}
	for len(b) > 0 {
		k := 0
		for k < len(b) && b[k] < utf8.RuneSelf {
			k++
		}
		out, b = append(out, b[:k]...), b[k:]
		if len(b) == 0 {
			break
		}
		if !utf8.FullRune(b) {
			d.held = append(d.held[:0], b...)
			break
		}
		_, n := utf8.DecodeRune(b)
		out, b = d.fold(b[:n], out), b[n:]
	}
	return out
}

// fold appends the ASCII bytes of one character's NFKD form.
func (d *asciiFolded) fold(char, out []byte) []byte {
	d.tmp = norm.NFKD.Append(d.tmp[:0], char...)
	for _, c := range d.tmp {
		if c < utf8.RuneSelf {
			out = append(out, c)
		}
	}
	return out
}

// flushed: a character cut off by the data's end is not ASCII.
func (d *asciiFolded) flushed(out []byte) []byte { return out }
