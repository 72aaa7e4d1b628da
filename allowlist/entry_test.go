package allowlist

import (
	"strconv"
	"strings"
	"testing"
)

// TestParseEntryRefuses holds one case per entry rule, each named after the
// attack or mistake it stops, and checks the whole message.
func TestParseEntryRefuses(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"ip_literal_dotted_quad", "10.0.0.1", `bare IP addresses are not allowed ("10.0.0.1")`},
		{"ip_literal_decimal_integer", "2130706433", `bare IP addresses are not allowed ("2130706433")`},
		{"ip_literal_short_form", "127.1", `bare IP addresses are not allowed ("127.1")`},
		{"ip_literal_hex", "0x7f.0.0.1", `bare IP addresses are not allowed ("0x7f.0.0.1")`},
		{"ip_literal_hex_last_label", "a.0x7f", `bare IP addresses are not allowed ("a.0x7f")`},
		{"ip_literal_octal", "0177.0.0.1", `bare IP addresses are not allowed ("0177.0.0.1")`},
		{"ip_literal_numeric_last_label", "evil.example.123", `bare IP addresses are not allowed ("evil.example.123")`},
		{"ip_literal_trailing_dot", "127.0.0.1.", `bare IP addresses are not allowed ("127.0.0.1.")`},
		{"ip_literal_ipv6", "::1", `bare IP addresses are not allowed ("::1")`},
		{"ip_literal_ipv6_brackets", "[::1]", `bare IP addresses are not allowed ("[::1]")`},
		{"ip_literal_ipv4_mapped", "::ffff:169.254.169.254", `bare IP addresses are not allowed ("::ffff:169.254.169.254")`},
		{"ip_literal_enclosed_alphanumerics", "①②⑦.⓪.⓪.①", `not a valid hostname under IDNA registration rules (disallowed rune U+2460) ("①②⑦.⓪.⓪.①")`},
		{"ip_literal_fullwidth_digits", "１２７.０.０.１", `not a valid hostname under IDNA registration rules (disallowed rune U+FF11) ("１２７.０.０.１")`},
		{"fullwidth_letters_mapped", "ｅｘａｍｐｌｅ.com", `not a valid hostname under IDNA registration rules (disallowed rune U+FF45) ("ｅｘａｍｐｌｅ.com")`},
		{"soft_hyphen_mapped", "exa\u00admple.com", `not a valid hostname under IDNA registration rules (disallowed rune U+00AD) ("exa\u00admple.com")`},
		{"zero_width_space", "exa\u200bmple.com", `not a valid hostname under IDNA registration rules (disallowed rune U+200B) ("exa\u200bmple.com")`},
		{"punycode_that_does_not_decode", "xn--zz.example.com", `not a valid hostname under IDNA registration rules (invalid label "zz") ("xn--zz.example.com")`},
		{"punycode_hiding_ascii", "xn--evil-.example.com", `not a valid hostname under IDNA registration rules (invalid label "evil-") ("xn--evil-.example.com")`},
		{"scheme", "https://api.example.com", `no scheme: write the hostname only (traffic is always https) ("https://api.example.com")`},
		{"port", "api.example.com:8443", `no port: the port is always 443 unless the operator exempts another ("api.example.com:8443")`},
		{"path", "api.example.com/v1", `no path, query or fragment: write the hostname only ("api.example.com/v1")`},
		{"userinfo", "user@api.example.com", `no userinfo: write the hostname only ("user@api.example.com")`},
		{"percent_encoding", "api%2eexample.com", `percent-encoding is not allowed: write the hostname itself ("api%2eexample.com")`},
		{"whitespace", " api.example.com", `whitespace is not allowed (" api.example.com")`},
		{"empty", "", `empty entry ("")`},
		{"wildcard_alone", "*", `a wildcard alone would allow every host; list the hosts you need ("*")`},
		{"wildcard_dot_alone", "*.", `a wildcard alone would allow every host; list the hosts you need ("*.")`},
		{"wildcard_partial_label", "*x.example.com", `a wildcard is allowed only as the whole first label ("*.cdn.example.com") ("*x.example.com")`},
		{"wildcard_in_middle", "a.*.example.com", `a wildcard is allowed only as the whole first label ("*.cdn.example.com") ("a.*.example.com")`},
		{"wildcard_two_labels_deep", "*.*.example.com", `a wildcard is allowed only as the whole first label ("*.cdn.example.com") ("*.*.example.com")`},
		{"wildcard_over_public_suffix_icann", "*.co.uk", `wildcard covers a public suffix, where anyone can register names; list each host you need ("*.co.uk")`},
		{"wildcard_over_public_suffix_tld", "*.com", `wildcard covers a public suffix, where anyone can register names; list each host you need ("*.com")`},
		{"wildcard_over_public_suffix_private_section", "*.github.io", `wildcard covers a public suffix, where anyone can register names; list each host you need ("*.github.io")`},
		{"wildcard_over_public_suffix_s3", "*.s3.amazonaws.com", `wildcard covers a public suffix, where anyone can register names; list each host you need ("*.s3.amazonaws.com")`},
		{"wildcard_over_psl_wildcard_children", "*.kawasaki.jp", `wildcard covers public suffixes (each child is one), where anyone can register names; list each host you need ("*.kawasaki.jp")`},
		{"wildcard_over_psl_wildcard_children_private", "*.compute.amazonaws.com", `wildcard covers public suffixes (each child is one), where anyone can register names; list each host you need ("*.compute.amazonaws.com")`},
		{"wildcard_over_public_suffix_upper_case", "*.CO.UK.", `wildcard covers a public suffix, where anyone can register names; list each host you need ("*.CO.UK.")`},
		{"wildcard_dns_service_nip", "10.0.0.1.nip.io", `nip.io resolves any IP address written into the name, so it is an IP allowlist in disguise ("10.0.0.1.nip.io")`},
		{"wildcard_dns_service_nip_dashed", "10-0-0-1.nip.io", `nip.io resolves any IP address written into the name, so it is an IP allowlist in disguise ("10-0-0-1.nip.io")`},
		{"wildcard_dns_service_sslip_wildcard", "*.sslip.io", `sslip.io resolves any IP address written into the name, so it is an IP allowlist in disguise ("*.sslip.io")`},
		{"wildcard_dns_service_localtest", "app.localtest.me", `localtest.me resolves any IP address written into the name, so it is an IP allowlist in disguise ("app.localtest.me")`},
		{"single_label_localhost", "localhost", `single-label names never reach the public internet; use the full hostname ("localhost")`},
		{"single_label_metadata", "metadata", `single-label names never reach the public internet; use the full hostname ("metadata")`},
		{"special_use_localhost_suffix", "evil.localhost", `special-use names (localhost, local, internal, arpa, …) never reach the public internet ("evil.localhost")`},
		{"special_use_gce_metadata", "metadata.google.internal", `special-use names (localhost, local, internal, arpa, …) never reach the public internet ("metadata.google.internal")`},
		{"special_use_mdns", "printer.local", `special-use names (localhost, local, internal, arpa, …) never reach the public internet ("printer.local")`},
		{"special_use_reverse_dns", "1.0.0.127.in-addr.arpa", `special-use names (localhost, local, internal, arpa, …) never reach the public internet ("1.0.0.127.in-addr.arpa")`},
		{"special_use_home_arpa", "router.home.arpa", `special-use names (localhost, local, internal, arpa, …) never reach the public internet ("router.home.arpa")`},
		{"special_use_onion", "abc.onion", `special-use names (localhost, local, internal, arpa, …) never reach the public internet ("abc.onion")`},
		{"label_too_long", strings.Repeat("a", 64) + ".example.com", `not a valid hostname under IDNA registration rules (invalid label "` + strings.Repeat("a", 64) + `") ("` + strings.Repeat("a", 64) + `.example.com")`},
		{"leading_hyphen", "-evil.example.com", `not a valid hostname under IDNA registration rules (invalid label "-evil") ("-evil.example.com")`},
		{"underscore", "a_b.example.com", `not a valid hostname under IDNA registration rules (disallowed rune U+005F) ("a_b.example.com")`},
		{"empty_label", "a..example.com", `not a valid hostname under IDNA registration rules (invalid label "a..example.com") ("a..example.com")`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, _, err := ParseEntry(tc.in)
			if err == nil {
				t.Fatalf("ParseEntry(%q) = %v, want error %q", tc.in, e, tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("ParseEntry(%q) error\n got: %s\nwant: %s", tc.in, err, tc.want)
			}
		})
	}
}

func TestParseEntryNameTooLong(t *testing.T) {
	long := strings.Repeat("a23456789.", 25) + "example.com" // 261 octets
	if _, _, err := ParseEntry(long); err == nil {
		t.Fatalf("ParseEntry accepted a %d-octet name", len(long))
	}
}

func TestParseEntryAccepts(t *testing.T) {
	cases := []struct {
		name, in, want string
		warnings       []string
	}{
		{"seed_voiceos_elevenlabs", "api.elevenlabs.io", "api.elevenlabs.io", nil},
		{"seed_sollar_exact", "erp.acme.example", "erp.acme.example", nil},
		{"seed_sollar_wildcard", "*.cdn.acme.example", "*.cdn.acme.example", nil},
		{"upper_case_normalised", "API.Example.COM", "api.example.com", []string{`normalised to lower case "api.example.com"`}},
		{"trailing_dot_removed", "api.example.com.", "api.example.com", []string{`trailing dot removed: "api.example.com"`}},
		{"idn_to_a_label", "bücher.example", "xn--bcher-kva.example", []string{`written as its A-label "xn--bcher-kva.example"`}},
		{"a_label_round_trips", "xn--bcher-kva.example", "xn--bcher-kva.example", nil},
		{"wildcard_over_registrable_domain", "*.example.co.uk", "*.example.co.uk", nil},
		{"wildcard_psl_exception_parent", "*.city.kawasaki.jp", "*.city.kawasaki.jp", nil},
		{"numeric_label_not_last", "123.example.com", "123.example.com", nil},
		{"hex_looking_label_not_last", "0x7f.example.com", "0x7f.example.com", nil},
		{"test_tld_stays_valid", "api.service.test", "api.service.test", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, warn, err := ParseEntry(tc.in)
			if err != nil {
				t.Fatalf("ParseEntry(%q): %v", tc.in, err)
			}
			if e.String() != tc.want {
				t.Errorf("ParseEntry(%q) = %q, want %q", tc.in, e.String(), tc.want)
			}
			if strings.Join(warn, "|") != strings.Join(tc.warnings, "|") {
				t.Errorf("ParseEntry(%q) warnings = %q, want %q", tc.in, warn, tc.warnings)
			}
		})
	}
}

func TestOperatorExtendsWildcardDNSServices(t *testing.T) {
	r := &Rules{WildcardDNSServices: []string{"rebind.example"}}
	_, _, err := r.ParseEntry("1-2-3-4.rebind.example")
	want := `rebind.example resolves any IP address written into the name, so it is an IP allowlist in disguise ("1-2-3-4.rebind.example")`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	if _, _, err := ParseEntry("1-2-3-4.rebind.example"); err != nil {
		t.Fatalf("built-in rules refused a name only the operator listed: %v", err)
	}
}

// TestIDNADeviationCharacterNamesTwoHostsAndIsRefused: "faß.example" is
// xn--fa-hia.example to egressd (IDNA2008) but fass.example to IDNA2003
// readers (Python's idna codec, java.net.IDN): two readers, two hosts. An
// entry holding a deviation character (ß, ς, ZWJ, ZWNJ) is an error that
// says to write the A-label or the other spelling; the A-label passes.
func TestIDNADeviationCharacterNamesTwoHostsAndIsRefused(t *testing.T) {
	for _, in := range []string{"faß.example", "ςigma.example", "*.faß.example", "a\u200db.example", "\u0915\u094d\u200c\u0937.example"} {
		doc := `{"manifest_version":1,"id":"com.x.idna","version":"1.0.0","network":{"connect":["evil.example",` + strconv.Quote(in) + `]}}`
		m, ps := Parse(SollarFile, []byte(doc), nil)
		found := false
		for _, p := range ps.Errors() {
			found = found || (p.Path == "network.connect[1]" && strings.Contains(p.Msg, "IDNA2003") && strings.Contains(p.Msg, "A-label"))
		}
		if m != nil || !found {
			t.Fatalf("%q: got %v %q", in, m, ps)
		}
	}
	if _, _, err := ParseEntry("xn--fa-hia.example"); err != nil {
		t.Fatalf("the A-label written explicitly: %v", err)
	}
}
