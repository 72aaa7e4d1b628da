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
		newEscapeView('u'),
		newEscapeView('\\'),
		newEscapeView('&'),
		// GraphQL's variables, sent as a JSON string in a query or a form
		// (the GET binding, express-graphql, Apollo) or inside a JSON body,
		// and cookie-parser's "j:" cookies: JSON read after percent-
		// decoding, or twice (round 46).
		&chained{first: newEscapeView('%'), second: newEscapeView('\\')},
		&chained{first: newEscapeView('\\'), second: newEscapeView('\\')},
		// Werkzeug's secure_filename, Flask's documented upload step:
		// NFKD, non-ASCII dropped, then every byte but [A-Za-z0-9_.-]
		// (blank runs and '/' as one '_'), of a filename or a filename*=
		// (round 46: a fullwidth letter, a zero-width space inside a
		// guess; round 47: a '!' inside one).
		&chained{first: newEscapeView('%'), second: &asciiFolded{}},
		// JSON and XML in UTF-16 or UTF-32 with escapes inside: the NULs
		// go first, as the parser decodes the text before its escapes.
		&chained{first: nulsDropped{}, second: newEscapeView('\\')},
		&chained{first: nulsDropped{}, second: newEscapeView('&')},
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

// nulsDropped gives its input without NUL bytes.
type nulsDropped struct{}

func (nulsDropped) decode(b, out []byte) []byte {
	for len(b) > 0 {
		k := bytes.IndexByte(b, 0)
		if k < 0 {
			return append(out, b...)
		}
		out, b = append(out, b[:k]...), b[k+1:]
	}
	return out
}

func (nulsDropped) flushed(out []byte) []byte { return out }

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

// asciiFolded reads UTF-8 text as Werkzeug's secure_filename leaves it
// (a model, not the function: filename cleaners differ, Django's
// get_valid_filename drops a TAB this reads as '_', and one an
// application applies is a transformation the README names as a
// residual): NFKD-normalised, everything not
// ASCII dropped (a fullwidth letter is its ASCII letter, a zero-width
// space nothing), a run of blanks or '/' one '_', and every other byte
// but letters, digits, '_', '.' and '-' dropped.
type asciiFolded struct {
	held  []byte // a character begun in the last read
	blank bool   // the last byte given was a run's '_'
}

// keep appends c as the filename cleaners leave it.
func (d *asciiFolded) keep(c byte, out []byte) []byte {
	switch {
	case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == '/':
		if !d.blank {
			d.blank = true
			return append(out, '_')
		}
		return out
	case isAlpha(c) || isDigit(c) || c == '_' || c == '.' || c == '-':
		d.blank = false
		return append(out, c)
	}
	return out
}

func (d *asciiFolded) decode(b, out []byte) []byte {
	if len(d.held) > 0 {
		// Complete the character begun last time, then go on. An invalid
		// sequence is one invalid byte, and what follows it is read anew,
		// as in one read (round 48: a lead byte held at a read's end took
		// the next read's character with it; Python gives U+FFFD for the
		// lead byte alone).
		for len(b) > 0 && !utf8.FullRune(d.held) {
			d.held, b = append(d.held, b[0]), b[1:]
		}
		if !utf8.FullRune(d.held) {
			return out
		}
		_, n := utf8.DecodeRune(d.held)
		out = d.fold(d.held[:n], out)
		if n < len(d.held) {
			b = append(append([]byte(nil), d.held[n:]...), b...)
		}
		d.held = d.held[:0]
	}
	for len(b) > 0 {
		k := 0
		for k < len(b) && b[k] < utf8.RuneSelf {
			out = d.keep(b[k], out)
			k++
		}
		if b = b[k:]; len(b) == 0 {
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

// fold appends the ASCII bytes of one character's NFKD form, read from
// norm's tables: its Append allocated for every character it decomposed
// (round 48: a body of U+FDFA cost the guard ten times an ordinary one, a
// hundred times its allocations). A character without a decomposition
// there (Hangul, which decomposes by rule, and every other non-ASCII one
// that stays as it is) gives no ASCII.
func (d *asciiFolded) fold(char, out []byte) []byte {
	for _, c := range norm.NFKD.Properties(char).Decomposition() {
		if c < utf8.RuneSelf {
			out = d.keep(c, out)
		}
	}
	return out
}

// flushed: a character cut off by the data's end is not ASCII.
func (d *asciiFolded) flushed(out []byte) []byte { return out }
