package broker

import (
	"bytes"
	"testing"
)

// TestTheEscapeViewDecodesEachFormatsEscapes: each syntax as its parser
// reads it, cut into two reads at every byte and read byte by byte, with
// what the data's end completes (flushed).
func TestTheEscapeViewDecodesEachFormatsEscapes(t *testing.T) {
	for _, c := range []struct {
		syntax   byte
		in, want string
	}{
		{'%', "%77inter+2019", "winter+2019"},           // plain percent: '+' kept
		{'u', "%u0077inter%U0069", "winteri"},           // %uXXXX (CGI.pm)
		{'%', "%ube3fK%39", "%ube3fK9"},                 // Werkzeug keeps "%u" (round 47)
		{'&', "s&#1;k&#x7f;-&#xfdd0;l&#65534;", "sk-l"}, // html.unescape drops these (round 47)
		{'&', "a&fjlig;ord", "afjord"},                  // the one name of two ASCII characters (round 48)
		{'&', "&#0x3f", "x3f"},                          // "&#0" then 'x': no hex reference (round 49)
		{'&', "&#x\x003f", "&#x3f"},                     // a NUL ends a reference (round 49)
		{'\\', "\\u00\x0041", "\\u0041"},                // and any escape
		{'\\', `\u0077inter\/x\"y\\`, `winter/x"y\`},
		{'&', "&#119;&#x69;&#X6e;&#0000000116;er", "winter"}, // numeric references, leading zeros
		{'&', "&#119inter", "winter"},                        // no ';' (HTML5, html.unescape)
		{'&', "a&lowbar;b&period;c&amp;d&ampe&lt", "a_b.c&d&e<"},
		{'%', "w\x00i\x00n\x00", "win"}, // UTF-16LE
		{'\\', "\x00\x00\x00w\x00\x00\x00i", "wi"},
		{'%', "%zz%u00zz%", "%zz%u00zz%"}, // not escapes: as written
		{'&', "&#;&#x;&foo;&", "&#;&#x;&foo;&"},
		{'\\', "\\q\\u00", "\\q\\u00"},
		{'%', "%%41", "%A"}, // an escape ends, the next begins
		{'&', "&&#65;", "&A"},
		{'&', "&#1234567890;", "&#12345678" + "90;"}, // past eight digits: as written
		// One syntax a view (round 46): a JSON parser keeps "%ab" and
		// "&#x1" as text, so the JSON view must too.
		{'\\', "%ab12&#x1f\u0041", "%ab12&#x1fA"},
	} {
		whole := viewEnded(newEscapeView(c.syntax), c.in, 0)
		if string(whole) != c.want {
			t.Errorf("%c %q: %q, want %q", c.syntax, c.in, whole, c.want)
			continue
		}
		for cut := 1; cut < len(c.in); cut++ {
			if got := viewEnded(newEscapeView(c.syntax), c.in, cut); !bytes.Equal(got, whole) {
				t.Errorf("%q cut at %d: %q, whole %q", c.in, cut, got, whole)
			}
		}
		d, out := newEscapeView(c.syntax), []byte(nil)
		for i := range len(c.in) {
			out = d.decode([]byte{c.in[i]}, out)
		}
		if out = d.flushed(out); !bytes.Equal(out, whole) {
			t.Errorf("%q byte by byte: %q, whole %q", c.in, out, whole)
		}
	}
}

// TestTheChainedViewsReadWhatStacksDecodeTwice: GraphQL variables as a
// JSON string in a percent-encoded query, JSON inside a JSON string, and
// a filename*= folded to ASCII as secure_filename does (round 46).
func TestTheChainedViewsReadWhatStacksDecodeTwice(t *testing.T) {
	for _, c := range []struct {
		view     mimeView
		in, want string
	}{
		{&chained{first: newEscapeView('%'), second: newEscapeView('\\')}, "%5Cu0077inter", "winter"},
		{&chained{first: newEscapeView('\\'), second: newEscapeView('\\')}, `\\u0077inter`, "winter"},
		{&chained{first: newEscapeView('%'), second: &asciiFolded{}}, "%EF%BD%97in%E2%80%8Bter", "winter"},                // fullwidth w, a zero-width space
		{&chained{first: newEscapeView('%'), second: &asciiFolded{}}, "sk!-live  x/y.txt", "sk-live_x_y.txt"},             // secure_filename's strip (round 47)
		{&chained{first: newEscapeView('%'), second: &asciiFolded{}}, "x%EF%C5%A4y", "xTy"},                               // an invalid lead byte alone, wherever reads end (round 48)
		{&chained{first: nulsDropped{}, second: newEscapeView('\\')}, "\\\x00u\x000\x000\x007\x007\x00i\x00n\x00", "win"}, // \u0077 in UTF-16
	} {
		for cut := 0; cut <= len(c.in); cut++ {
			if got := viewEnded(c.view, c.in, cut); string(got) != c.want {
				t.Fatalf("%q cut at %d: %q, want %q", c.in, cut, got, c.want)
			}
			c.view = freshView(c.view)
		}
	}
}

// freshView is a new view of v's kind, its state empty.
func freshView(v mimeView) mimeView {
	c := v.(*chained)
	return &chained{first: freshOne(c.first), second: freshOne(c.second)}
}

func freshOne(v mimeView) mimeView {
	switch v := v.(type) {
	case *escapeView:
		return &escapeView{starts: v.starts}
	case *asciiFolded:
		return &asciiFolded{}
	case nulsDropped:
		return nulsDropped{}
	}
	panic("freshOne")
}

// TestPHPNamesAreReadAsPHPReadsThem: ' ', '.', '[' and '+' (form-decoded)
// are '_' in a PHP variable name.
func TestPHPNamesAreReadAsPHPReadsThem(t *testing.T) {
	if got := viewEnded(&phpNames{}, "sk.live.A=0&sk+live+B=1&sk[live%2EC=2", 5); string(got) != "sk_live_A=0&sk_live_B=1&sk_live_C=2" {
		t.Fatalf("%q", got)
	}
}

// viewEnded is what v gives for in read in two reads cut at cut, the data
// ending after them.
func viewEnded(v mimeView, in string, cut int) []byte {
	return v.flushed(viewAll(v, in, cut))
}
