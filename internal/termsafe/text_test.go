package termsafe

import (
	"strings"
	"testing"
)

// TestTextPassesLinesAndEscapesWhatATerminalActsOn: the escape sequences a
// hostile program would leave a terminal in (alternate screen, hidden
// cursor, mouse reporting, OSC 52 clipboard, a title) and a lone CR come
// out as visible text; lines, tabs, CR LF and UTF-8 pass unchanged, even
// when a write boundary cuts a rune or a CR LF.
func TestTextPassesLinesAndEscapesWhatATerminalActsOn(t *testing.T) {
	in := "ok\tdone\r\nh\u00e9llo \u4e16\n\x1b[?1049h\x1b[?25l\x1b[?1000h\x1b]52;c;ZXZpbA==\x07\x1b]0;title\x07fake\rALL CLEAR\n\u009b31m\xff\u202e"
	want := "ok\tdone\r\nh\u00e9llo \u4e16\n\\x1b[?1049h\\x1b[?25l\\x1b[?1000h\\x1b]52;c;ZXZpbA==\\x07\\x1b]0;title\\x07fake\\x0dALL CLEAR\n\\u009b31m\\xff\\u202e"
	for cut := 0; cut <= len(in); cut++ {
		var b strings.Builder
		w := Text(&b)
		w.Write([]byte(in[:cut]))
		w.Write([]byte(in[cut:]))
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if b.String() != want {
			t.Fatalf("cut at %d:\n got %q\nwant %q", cut, b.String(), want)
		}
	}
}

// TestTextFlushEscapesWhatTheStreamEndedOn: a stream that ends inside a
// rune or on a CR loses nothing.
func TestTextFlushEscapesWhatTheStreamEndedOn(t *testing.T) {
	var b strings.Builder
	w := Text(&b)
	w.Write([]byte("end\xe4\xb8"))
	w.Flush()
	if b.String() != `end\xe4\xb8` {
		t.Fatalf("%q", b.String())
	}
	b.Reset()
	w.Write([]byte("end\r"))
	w.Flush()
	if b.String() != `end\x0d` {
		t.Fatalf("%q", b.String())
	}
}

func FuzzTextLeavesNoControl(f *testing.F) {
	f.Add([]byte("a\x1b[2J\r\nb"), 3)
	f.Fuzz(func(t *testing.T, p []byte, cut int) {
		if cut < 0 || cut > len(p) {
			cut = len(p) / 2
		}
		var b strings.Builder
		w := Text(&b)
		w.Write(p[:cut])
		w.Write(p[cut:])
		w.Flush()
		out := strings.ReplaceAll(b.String(), "\r\n", "\n")
		for _, r := range out {
			if r != '\n' && r != '\t' && unsafeRune(r) {
				t.Fatalf("%q left %q in %q", p, r, out)
			}
		}
	})
}
