package termsafe

import "testing"

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
		{"printable_unicode_kept", "bücher.example ① 日本", "bücher.example ① 日本"},
		{"clean_ascii_kept", "permissions[0].domains[2]", "permissions[0].domains[2]"},
		{"backslash_kept", `a\x1b`, `a\x1b`},
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
		if firstUnsafe(out) >= 0 {
			t.Fatalf("String(%q) = %q still holds a control", s, out)
		}
		if firstUnsafe(s) < 0 && out != s {
			t.Fatalf("clean %q changed to %q", s, out)
		}
	})
}
