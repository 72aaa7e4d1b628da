package proxy

import (
	"github.com/egressd/egressd/policy"
	"io"
	"strings"
	"testing"
)

func TestAllowedHostThroughRealTLSOrigin(t *testing.T) {
	e := newEnv(t)
	e.resolveToOrigin("api.allowed.example")
	c := e.client()
	defer c.CloseIdleConnections()
	resp, err := c.Get(e.originURL("api.allowed.example", "/"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(body), "hello from api.allowed.example") {
		t.Fatalf("body %q", body)
	}
	connect := e.log.waitEvent(t, map[string]any{"event": "connect", "decision": "allow", "reason": "allowed", "host": "api.allowed.example", "rule": "api.allowed.example", "integration": "com.test.weather", "addr": e.origin.Addr.String()})
	if !strings.Contains(connect["exemption"].(string), "allow_private:127.0.0.2/32") {
		t.Errorf("exemption not stamped: %v", connect)
	}
}

func TestEachRefusalHasStatusReasonAndAuditLine(t *testing.T) {
	e := newEnv(t, withConfig(func(c *policy.Config) {
		g, _ := policy.CompileHostGlob("other.*.example")
		c.Deny.Hosts = append(c.Deny.Hosts, g)
	}))
	e.dns.Add(t, "rebind.cdn.allowed.example. 60 IN A 169.254.169.254")
	port := itoa(e.origin.Addr.Port())
	cases := []struct {
		name, target string
		status       int
		reason       string
		sentence     string
	}{
		{"not_allowlisted", "evil.example:" + port, 403, "not_allowlisted", "egressd: evil.example is not in the network permission of com.test.weather 1.0.0 (add it to permissions[].domains)"},
		{"ip_literal", "169.254.169.254:443", 403, "ip_literal", "egressd: IP addresses cannot be reached directly; connect by a hostname listed in the network permission of com.test.weather 1.0.0"},
		{"bad_request", "api.allowed.example", 400, "bad_request", "egressd: the CONNECT target must be a hostname and a port, like api.example.com:443"},
		{"port_not_allowed", "api.allowed.example:22", 403, "port_not_allowed", "egressd: port 22 is not allowed for com.test.weather 1.0.0; egressd carries https on port 443 only"},
		{"operator_denied", "other.allowed.example:" + port, 403, "operator_denied", "egressd: other.allowed.example is denied by the operator's policy (deny.hosts: other.*.example); a manifest cannot override it"},
		{"private_address", "rebind.cdn.allowed.example:" + port, 403, "private_address", "egressd: rebind.cdn.allowed.example resolves to a private or reserved address, which egressd never connects to"},
		{"dns_error", "nxdomain.cdn.allowed.example:" + port, 502, "dns_error", "egressd: nxdomain.cdn.allowed.example could not be resolved"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, resp := e.rawConnect("CONNECT " + tc.target + " HTTP/1.1\r\nHost: " + tc.target + "\r\n\r\n")
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || resp.Header.Get(ReasonHeader) != tc.reason || string(body) != tc.sentence+"\n" {
				t.Fatalf("got %d %q %q", resp.StatusCode, resp.Header.Get(ReasonHeader), body)
			}
			if !resp.Close {
				t.Errorf("a refusal must close the connection")
			}
			e.log.waitEvent(t, map[string]any{"event": "connect", "decision": "deny", "reason": tc.reason, "host_raw": tc.target})
		})
	}
}
