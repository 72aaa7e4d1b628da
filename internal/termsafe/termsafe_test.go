package termsafe

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestStringEscapesWhatATerminalWouldAct(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"osc_title_clear_screen_and_colour", "\x1b]0;pwned\x07\x1b[2J\x1b[31mALL CLEAR", `\x1b]0;pwned\x07\x1b[2J\x1b[31mALL CLEAR`},
		{"newline_and_carriage_return_forge_lines", "a\r\nok config", `a\x0d\x0aok config`},
		{"tab_and_nul", "a\tb\x00", `a\x09b\x00`},
		{"del", "a\x7fb", `a\x7fb`},
		{"c1_csi_as_utf8", "a\u009b2Jb", `a\u009b2Jb`},
		{"invalid_utf8_byte_that_is_c1_on_8bit_terminals", "a\x9b2J", `a\x9b2J`},
		{"bidi_override_reorders_text", "evil\u202egnp.exe", `evil\u202egnp.exe`},
		{"bidi_isolates", "\u2066a\u2069", `\u2066a\u2069`},
		{"zero_width_space_format", "net\u200bwork", `net\u200bwork`},
		{"zero_width_joiner_and_soft_hyphen", "a\u200d\u00adb", `a\u200d\u00adb`},
		{"hangul_filler_default_ignorable", "a\u3164b\u115f", `a\u3164b\u115f`},
		{"byte_order_mark_and_tag_characters", "\ufeffa\U000e0041", `\ufeffa\U000e0041`},
		{"variation_selector", "x\ufe0f", `x\ufe0f`},
		{"printable_unicode_kept", "bücher.example ① 日本", "bücher.example ① 日本"},
		{"clean_ascii_kept", "permissions[0].domains[2]", "permissions[0].domains[2]"},
		{"backslash_kept", `a\x1b`, `a\x1b`}, // String of String's output is that output
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := String(tc.in); got != tc.want {
				t.Fatalf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestCleanTextDoesNotAllocate(t *testing.T) {
	s := "api.example.com: ok com.acme.erp 1.0.0"
	if n := testing.AllocsPerRun(100, func() { _ = String(s) }); n != 0 {
		t.Fatalf("allocates %v", n)
	}
}

func FuzzStringLeavesNoControl(f *testing.F) {
	f.Add("\x1b[31m\u202e\x9b")
	f.Fuzz(func(t *testing.T, s string) {
		out := String(s)
		if !utf8.ValidString(out) || strings.IndexFunc(out, unsafeRune) >= 0 {
			t.Fatalf("String(%q) = %q still holds a control", s, out)
		}
		if again := String(out); again != out {
			t.Fatalf("String(%q) = %q, escaped again %q: code that escapes twice would show another text", s, out, again)
		}
		if firstUnsafe(s) < 0 && out != s {
			t.Fatalf("clean %q changed to %q", s, out)
		}
	})
}
func TestTerminalEscapesInHostileTextAreShownNotObeyed(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain ASCII is kept", "api.example.com:443", "api.example.com:443"},
		{"printable Unicode is kept", "bücher.example ✓", "bücher.example ✓"},
		{"title set, bell, clear screen", "\x1b]0;pwned\x07\x1b[2J\x1b[31mALL CLEAR", `\x1b]0;pwned\x07\x1b[2J\x1b[31mALL CLEAR`},
		{"newline and tab cannot forge a line", "a\nb\tc\r", `a\x0ab\x09c\x0d`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"C1 CSI as a rune", "a\u009b2Jb", `a\u009b2Jb`},
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

func TestLinesEscapesALineBreakInsideAMessage(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(Lines(&b), "egressd: warning: %s changed its id\n", "/x/plugin\x1b]0;PWNED\x07\n{\"event\":\"checkpoint\",\"chain\":\"c\",\"seq\":9,\"hash\":\"00\"}")
	want := `egressd: warning: /x/plugin\x1b]0;PWNED\x07\x0a{"event":"checkpoint","chain":"c","seq":9,"hash":"00"} changed its id` + "\n"
	if b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
}

// TestUnicodeLineAndParagraphSeparatorsAreEscaped is issue 18's break 6
// (f18b): egressd check printed U+2028 and U+2029 as they were, and a
// terminal, a log viewer or a JavaScript-based pager breaks the line there,
// so a manifest key can forge a line of check's output. The other Unicode
// characters that break or reorder a line are escaped with them.
func TestUnicodeLineAndParagraphSeparatorsAreEscaped(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a\u2028ok: all clear", `a\u2028ok: all clear`},
		{"a\u2029b", `a\u2029b`},
		{"a\u0085b", `a\u0085b`},
		{"\u200fx\u200e", `\u200fx\u200e`},
		{"\u061cx", `\u061cx`},
		{"\u202ax\u202c\u202d\u202e", `\u202ax\u202c\u202d\u202e`},
		{"\u2066\u2067\u2068x\u2069", `\u2066\u2067\u2068x\u2069`},
	} {
		if got := String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	var b strings.Builder
	fmt.Fprintf(Lines(&b), "x\u2028y\n")
	if b.String() != "x\\u2028y\n" {
		t.Fatalf("Lines wrote %q", b.String())
	}
}

// TestSpacesOtherThanTheSpaceAreEscaped: a folder named with a no-break
// space read, in "approved ... in /srv/a<NBSP>b", as the folder with a
// plain space (round 16 trust-chain attacker, LOW): a reviewer cannot
// tell them apart, so every space but U+0020 is shown escaped.
func TestSpacesOtherThanTheSpaceAreEscaped(t *testing.T) {
	for in, want := range map[string]string{
		"/srv/a\u00a0b":  `/srv/a\u00a0b`,
		"a\u2007b":       `a\u2007b`,
		"a\u202fb\u3000": `a\u202fb\u3000`,
		"a b":            "a b",
	} {
		if got := String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestBlankLookingLettersAreEscaped: Braille pattern blank and the
// musical null notehead are letters drawn as blanks: "erp\u2800" read as
// "erp " (round 17 trust-chain attacker, LOW).
func TestBlankLookingLettersAreEscaped(t *testing.T) {
	for in, want := range map[string]string{"erp\u2800": `erp\u2800`, "a\U0001d159": `a\U0001d159`} {
		if got := String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLinesUpToCutsALongMessageAndMarksIt: round 39. serve's stderr is a
// journal whose sinks split long lines; a message past the cap is cut,
// marked, and still one line.
func TestLinesUpToCutsALongMessageAndMarksIt(t *testing.T) {
	var b strings.Builder
	w := LinesUpTo(&b, 64)
	w.Write([]byte(strings.Repeat("é", 100) + "\n"))
	w.Write([]byte("short\n"))
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 || len(lines[0]) > 64 || !strings.HasSuffix(lines[0], "(cut)") || !utf8.ValidString(lines[0]) || lines[1] != "short" {
		t.Fatalf("%q", b.String())
	}
}
