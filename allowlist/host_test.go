package allowlist

import (
	"errors"
	"strings"
	"testing"
)

func TestParseWireHostRefuses(t *testing.T) {
	cases := []struct {
		name, in string
		form     WireForm
		want     string
		ip       bool
	}{
		{"ip_literal_dotted_quad", "127.0.0.1", HostForm, "last label is numeric, which resolvers read as an IP address", true},
		{"ip_literal_short_form", "127.1", HostForm, "last label is numeric, which resolvers read as an IP address", true},
		{"ip_literal_decimal_integer", "2130706433", HostForm, "last label is numeric, which resolvers read as an IP address", true},
		{"ip_literal_hex", "0x7f000001", HostForm, "last label is numeric, which resolvers read as an IP address", true},
		{"ip_literal_hex_upper", "0X7F.1", HostForm, "last label is numeric, which resolvers read as an IP address", true},
		{"ip_literal_hex_empty", "a.0x", HostForm, "last label is numeric, which resolvers read as an IP address", true},
		{"ip_literal_octal", "0177.0.0.1", HostForm, "last label is numeric, which resolvers read as an IP address", true},
		{"ip_literal_metadata_short", "169.254.43518", HostForm, "last label is numeric, which resolvers read as an IP address", true},
		{"ip_literal_trailing_dot", "127.0.0.1.", HostForm, "last label is numeric, which resolvers read as an IP address", true},
		{"ip_literal_ipv6_brackets", "[::1]", HostForm, "IPv6 address literal", true},
		{"ip_literal_ipv6_bare", "::ffff:127.0.0.1", HostForm, "IPv6 address literal", true},
		{"percent_encoding", "%31%32%37.0.0.1", HostForm, `character '%' is not allowed (ASCII letters, digits, '-' and '.' only)`, false},
		{"enclosed_alphanumerics_not_mapped", "①②⑦.⓪.⓪.①", HostForm, `character 'â' is not allowed (ASCII letters, digits, '-' and '.' only)`, false},
		{"fullwidth_not_mapped", "ｅｘａｍｐｌｅ.com", HostForm, `character 'ï' is not allowed (ASCII letters, digits, '-' and '.' only)`, false},
		{"utf8_not_mapped", "bücher.example", HostForm, `character 'Ã' is not allowed (ASCII letters, digits, '-' and '.' only)`, false},
		{"underscore", "a_b.example.com", HostForm, `character '_' is not allowed (ASCII letters, digits, '-' and '.' only)`, false},
		{"nul_byte", "a\x00.example.com", HostForm, `character '\x00' is not allowed (ASCII letters, digits, '-' and '.' only)`, false},
		{"wildcard_on_wire", "*.example.com", HostForm, `character '*' is not allowed (ASCII letters, digits, '-' and '.' only)`, false},
		{"empty", "", HostForm, "empty host", false},
		{"root_only", ".", HostForm, "empty host", false},
		{"two_trailing_dots", "example.com..", HostForm, "empty label", false},
		{"leading_dot", ".example.com", HostForm, "empty label", false},
		{"label_too_long", strings.Repeat("a", 64) + ".com", HostForm, "label is longer than 63 octets", false},
		{"name_too_long", strings.Repeat("abcdefghi.", 26) + "com", HostForm, "name is longer than 253 octets", false},
		{"leading_hyphen", "-a.example.com", HostForm, "label starts or ends with '-'", false},
		{"sni_trailing_dot", "api.example.com.", SNIForm, "trailing dot is not allowed in server_name", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, err := ParseWireHost(tc.in, tc.form)
			if err == nil {
				t.Fatalf("ParseWireHost(%q) = %q, want error", tc.in, n)
			}
			var he *HostError
			if !errors.As(err, &he) || he.Msg != tc.want {
				t.Errorf("ParseWireHost(%q) = %v, want message %q", tc.in, err, tc.want)
			}
			if got := errors.Is(err, ErrIPLiteral); got != tc.ip {
				t.Errorf("errors.Is(ErrIPLiteral) = %v, want %v", got, tc.ip)
			}
		})
	}
}

func TestParseWireHostCanonicalises(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"upper_case_lowered", "API.Example.COM", "api.example.com"},
		{"trailing_dot_removed", "api.example.com.", "api.example.com"},
		{"a_label_kept", "xn--bcher-kva.example", "xn--bcher-kva.example"},
		{"numeric_first_label", "123.example.com", "123.example.com"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, err := ParseWireHost(tc.in, HostForm)
			if err != nil || n.String() != tc.want {
				t.Fatalf("ParseWireHost(%q) = %q, %v; want %q", tc.in, n, err, tc.want)
			}
		})
	}
}

// TestEntryAndWireAgree checks that a name written in a manifest and the same
// name sent on the wire become the same canonical Name.
func TestEntryAndWireAgree(t *testing.T) {
	for _, s := range []string{"API.elevenlabs.io", "erp.acme.example.", "xn--bcher-kva.example"} {
		e, _, err := ParseEntry(s)
		if err != nil {
			t.Fatal(err)
		}
		w, err := ParseWireHost(s, HostForm)
		if err != nil {
			t.Fatal(err)
		}
		if e.Base != w {
			t.Errorf("%q: entry %q != wire %q", s, e.Base, w)
		}
	}
}
