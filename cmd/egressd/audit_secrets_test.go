package main

import (
	"strings"
	"testing"

	"github.com/egressd/egressd/audit"
)

// TestAuditReportListsWhereEachBrokeredSecretWent: `egressd audit verify`
// accepts request events and `egressd audit report` (text and html) lists,
// per secret, the hosts it was added for and how often.
func TestAuditReportListsWhereEachBrokeredSecretWent(t *testing.T) {
	req := func(host string, secrets ...string) audit.Event {
		return audit.Event{Kind: audit.Request, Integration: "com.test.weather", Host: host, Port: 443, Conn: "c1",
			Method: "POST", Path: "/v1/forecast", Status: 200, Decision: "allow", Secrets: secrets}
	}
	path := writeLog(t,
		audit.Event{Kind: audit.Connect, Integration: "com.test.weather", Decision: "allow", Reason: "allowed", Host: "api.weather.example", Conn: "c1"},
		req("api.weather.example", "WEATHER_KEY"), req("api.weather.example", "WEATHER_KEY"), req("eu.weather.example", "WEATHER_KEY"),
	)
	if out, errs, code := runCLI(t, "audit", "verify", path); code != 0 {
		t.Fatalf("verify exit %d: %s %s", code, out, errs)
	}
	out, errs, code := runCLI(t, "audit", "report", path)
	if code != 0 || !strings.Contains(out, "secrets added:") || !strings.Contains(out, "WEATHER_KEY  api.weather.example  2") || !strings.Contains(out, "WEATHER_KEY  eu.weather.example   1") {
		t.Fatalf("text report (exit %d, %s):\n%s", code, errs, out)
	}
	html, errs, code := runCLI(t, "audit", "report", "--format", "html", path)
	if code != 0 || !strings.Contains(html, "Secrets added by egressd") || !strings.Contains(html, "<td>2</td>") {
		t.Fatalf("html report (exit %d, %s)", code, errs)
	}
}
