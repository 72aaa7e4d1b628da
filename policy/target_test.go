package policy

import "testing"

func TestDecideTargetRefusesMalformedTargets(t *testing.T) {
	m := testManifest(t, "erp.acme.example")
	p := NewPolicy(m, m.Entries, PolicyOptions{})
	cases := []struct {
		name, raw string
		want      Reason
	}{
		{"no_port", "erp.acme.example", BadRequest},
		{"empty_port", "erp.acme.example:", BadRequest},
		{"port_zero", "erp.acme.example:0", BadRequest},
		{"port_too_large", "erp.acme.example:65536", BadRequest},
		{"port_leading_zero", "erp.acme.example:0443", BadRequest},
		{"port_sign", "erp.acme.example:+443", BadRequest},
		{"port_hex", "erp.acme.example:0x1bb", BadRequest},
		{"percent_encoded_host", "%65rp.acme.example:443", BadRequest},
		{"percent_encoded_enclosed_one", "%E2%91%A0.acme.example:443", BadRequest},
		{"userinfo", "user@erp.acme.example:443", BadRequest},
		{"asterisk", "*:443", BadRequest},
		{"ipv6_zone_id", "[fe80::1%25eth0]:443", BadRequest},
		{"path", "erp.acme.example:443/x", BadRequest},
		{"space", "erp.acme.example :443", BadRequest},
		{"nul", "erp.acme.example\x00:443", BadRequest},
		{"unbalanced_bracket", "[::1:443", BadRequest},
		{"empty_host", ":443", BadRequest},
		{"ipv6_literal", "[::1]:443", IPLiteral},
		{"ipv6_mapped_metadata", "[::ffff:169.254.169.254]:443", IPLiteral},
		{"ipv4_literal", "169.254.169.254:443", IPLiteral},
		{"ipv4_short", "127.1:443", IPLiteral},
		{"ok", "erp.acme.example:443", Allowed},
		{"ok_trailing_dot", "erp.acme.example.:443", Allowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if d := p.DecideTarget(tc.raw); d.Reason != tc.want {
				t.Fatalf("DecideTarget(%q) = %s, want %s", tc.raw, d.Reason, tc.want)
			}
		})
	}
}
