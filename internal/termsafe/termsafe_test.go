package termsafe

import "testing"

func TestTerminalEscapesInHostileTextAreShownNotObeyed(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain ASCII is kept", "api.example.com:443", "api.example.com:443"},
		{"printable Unicode is kept", "bücher.example ✓", "bücher.example ✓"},
		{"title set, bell, clear screen", "\x1b]0;pwned\x07\x1b[2J\x1b[31mALL CLEAR", `\x1b]0;pwned\x07\x1b[2J\x1b[31mALL CLEAR`},
		{"newline and tab cannot forge a line", "a\nb\tc\r", `a\x0ab\x09c\x0d`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"C1 CSI as a rune", "a\u009b2Jb", `a\x9b2Jb`},
		{"bidi override reverses what is read", "evil\u202egpj.exe", `evil\u202egpj.exe`},
		{"bidi isolates", "\u2066x\u2069", `\u2066x\u2069`},
		{"invalid UTF-8 bytes", "a\xff\xc0b", `a\xff\xc0b`},
		{"a lone C1 byte", "a\x9bb", `a\x9bb`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := String(c.in); got != c.want {
				t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestEscapedTextHoldsNoControlByte(t *testing.T) {
	var all []byte
	for b := 0; b < 256; b++ {
		all = append(all, byte(b))
	}
	out := String(string(all) + "\u202e\u0085")
	for i := 0; i < len(out); i++ {
		if c := out[i]; c < 0x20 || c == 0x7f {
			t.Fatalf("control byte %#x at %d in %q", c, i, out)
		}
	}
}
