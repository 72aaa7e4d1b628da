package broker

import (
	"bytes"
	"testing"
)

// TestTheEscapeViewDecodesEachFormatsEscapes: each syntax as its parser
// reads it, cut into two reads at every byte and read byte by byte, with
// what the data's end completes (flushed).
func TestTheEscapeViewDecodesEachFormatsEscapes(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"%77inter+2019", "winter+2019"},                // plain percent: '+' kept
		{"%u0077inter%U0069", "winteri"},                // %uXXXX (CGI.pm)
		{`\u0077inter\/x\"y\\`, `winter/x"y\`},          // JSON
		{"&#119;&#x69;&#X6e;&#0000000116;er", "winter"}, // numeric references, leading zeros
		{"&#119inter", "winter"},                        // no ';' (HTML5, html.unescape)
		{"a&lowbar;b&period;c&amp;d&ampe&lt", "a_b.c&d&e<"},
		{"w\x00i\x00n\x00", "win"}, // UTF-16LE
		{"\x00\x00\x00w\x00\x00\x00i", "wi"},
		{"&#;&#x;%zz%u00zz\\q&foo;&", "&#;&#x;%zz%u00zz\\q&foo;&"}, // not escapes: as written
		{"%%41&&#65;\\\\u0041", "%A&A\\u0041"},                     // an escape ends, the next begins
		{"&#1234567890;", "&#12345678" + "90;"},                    // past eight digits: as written
	} {
		whole := viewEnded(&escapeView{}, c.in, 0)
		if string(whole) != c.want {
			t.Errorf("%q: %q, want %q", c.in, whole, c.want)
			continue
		}
		for cut := 1; cut < len(c.in); cut++ {
			if got := viewEnded(&escapeView{}, c.in, cut); !bytes.Equal(got, whole) {
				t.Errorf("%q cut at %d: %q, whole %q", c.in, cut, got, whole)
			}
		}
		d, out := &escapeView{}, []byte(nil)
		for i := range len(c.in) {
			out = d.decode([]byte{c.in[i]}, out)
		}
		if out = d.flushed(out); !bytes.Equal(out, whole) {
			t.Errorf("%q byte by byte: %q, whole %q", c.in, out, whole)
		}
	}
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
