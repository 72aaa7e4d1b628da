package policy

import (
	"net/netip"
	"testing"

	"github.com/egressd/egressd/allowlist"
)

func testManifest(t testing.TB, entries ...string) *allowlist.Manifest {
	t.Helper()
	m := &allowlist.Manifest{Format: allowlist.Sollar, ID: "com.acme.erp", Version: "1.0.0"}
	for _, s := range entries {
		e, _, err := allowlist.ParseEntry(s)
		if err != nil {
			t.Fatal(err)
		}
		m.Entries = append(m.Entries, e)
	}
	return m
}

func TestDecide(t *testing.T) {
	deny, err := CompileHostGlob("*.internal-cdn.acme.example")
	if err != nil {
		t.Fatal(err)
	}
	m := testManifest(t, "erp.acme.example", "*.cdn.acme.example", "*.internal-cdn.acme.example")
	enforce := NewPolicy(m, m.Entries, PolicyOptions{Deny: OperatorDeny{Hosts: []HostGlob{deny}}, Exemptions: Exemptions{AllowPorts: []uint16{8443}}})
	audit := NewPolicy(m, m.Entries, PolicyOptions{Exemptions: Exemptions{Mode: Audit}})
	cases := []struct {
		name string
		p    *Policy
		host string
		port uint16
		want Decision
	}{
		{"allowed_exact", enforce, "erp.acme.example", 443, Decision{Verdict: Allow, Reason: Allowed, Rule: "erp.acme.example", Host: wire(t, "erp.acme.example"), Port: 443}},
		{"allowed_wildcard_upper_case", enforce, "IMG.cdn.acme.example", 443, Decision{Verdict: Allow, Reason: Allowed, Rule: "*.cdn.acme.example", Host: wire(t, "img.cdn.acme.example"), Port: 443}},
		{"not_allowlisted", enforce, "evil.example", 443, Decision{Reason: NotAllowlisted, Host: wire(t, "evil.example"), Port: 443}},
		{"wildcard_apex_not_allowlisted", enforce, "cdn.acme.example", 443, Decision{Reason: NotAllowlisted, Host: wire(t, "cdn.acme.example"), Port: 443}},
		{"ip_literal_dotted", enforce, "169.254.169.254", 443, Decision{Reason: IPLiteral, Port: 443}},
		{"ip_literal_decimal", enforce, "2852039166", 443, Decision{Reason: IPLiteral, Port: 443}},
		{"ip_literal_ipv6", enforce, "[::1]", 443, Decision{Reason: IPLiteral, Port: 443}},
		{"malformed_host", enforce, "a_b.example", 443, Decision{Reason: BadRequest, Port: 443}},
		{"port_not_allowed", enforce, "erp.acme.example", 80, Decision{Reason: PortNotAllowed, Host: wire(t, "erp.acme.example"), Port: 80}},
		{"port_exemption_stamped", enforce, "erp.acme.example", 8443, Decision{Verdict: Allow, Reason: Allowed, Rule: "erp.acme.example", Host: wire(t, "erp.acme.example"), Port: 8443, Exemption: "allow_port:8443"}},
		{"operator_glob_narrows_manifest", enforce, "x.internal-cdn.acme.example", 443, Decision{Reason: OperatorDenied, Rule: "deny.hosts: *.internal-cdn.acme.example", Host: wire(t, "x.internal-cdn.acme.example"), Port: 443}},
		{"audit_mode_would_deny", audit, "evil.example", 443, Decision{Verdict: WouldDeny, Reason: NotAllowlisted, Host: wire(t, "evil.example"), Port: 443, Exemption: "audit_mode"}},
		{"audit_mode_still_refuses_ip_literal", audit, "127.0.0.1", 443, Decision{Reason: IPLiteral, Port: 443}},
		{"audit_mode_still_refuses_port", audit, "evil.example", 22, Decision{Reason: PortNotAllowed, Host: wire(t, "evil.example"), Port: 22}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Decide(tc.host, tc.port); got != tc.want {
				t.Fatalf("Decide(%q, %d)\n got %+v\nwant %+v", tc.host, tc.port, got, tc.want)
			}
		})
	}
}

func TestZeroDecisionDenies(t *testing.T) {
	var d Decision
	if d.Verdict.Permits() {
		t.Fatal("the zero Decision permits")
	}
}

func TestEmptyAllowlistAllowsNothing(t *testing.T) {
	p := NewPolicy(testManifest(t), nil, PolicyOptions{Exemptions: Exemptions{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}}})
	if d := p.Decide("api.example.com", 443); d.Verdict.Permits() {
		t.Fatalf("empty allowlist: %+v", d)
	}
}

func wire(t testing.TB, s string) allowlist.Name {
	n, err := allowlist.ParseWireHost(s, allowlist.HostForm)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
