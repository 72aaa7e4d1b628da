package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// reloadFixture is a serve config in a folder: com.test.weather in
// integrations/weather, served on a loopback port, with an admin listener.
type reloadFixture struct {
	root, cfg, audit string
}

func newReloadFixture(t *testing.T) *reloadFixture {
	f := &reloadFixture{root: t.TempDir()}
	f.cfg, f.audit = filepath.Join(f.root, "egressd.yaml"), filepath.Join(f.root, "audit.log")
	os.MkdirAll(filepath.Join(f.root, "integrations", "weather"), 0o755)
	os.WriteFile(filepath.Join(f.root, "integrations", "weather", "manifest.json"), weatherManifest("1.0.0", `"api.weather.example"`), 0o600)
	return f
}

// write writes the config: the base, then the integration's own settings
// (indented under it), then anything else at the top level.
func (f *reloadFixture) write(t *testing.T, integration, extra string) {
	t.Helper()
	doc := "state_dir: " + filepath.Join(f.root, "state") + "\nadmin: 127.0.0.1:0\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: " + f.audit + "}\n" +
		"integrations:\n  - manifest: integrations/weather\n    listen: 127.0.0.1:0\n" + integration + extra
	if err := os.WriteFile(f.cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestServeReloadRefusedDuplicateEntryChangesNothing is issue 18.5: a
// manifests: folder entry that covers a served integration, with audit
// mode and allow_private, is refused on reload, and its options do not
// take over the served integration's listener; check --config finds the
// duplicate as serve does at start.
func TestServeReloadRefusedDuplicateEntryChangesNothing(t *testing.T) {
	f := newReloadFixture(t)
	f.write(t, "", "")
	sv := startServe(t, "--config", f.cfg)
	if r := connectReason(t, sv.listen, "evil.example"); r != "not_allowlisted" {
		t.Fatalf("before reload: %s", r)
	}
	f.write(t, "", "manifests:\n  - dir: integrations\n    listen: unix:"+f.root+"/{name}.sock\n    mode: audit\n    allow_private: [10.0.0.0/8]\n")
	sv.sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: f.audit}, `"action":"failed".*"error":"this manifest is already served on 127.0.0.1:0`)
	if r := connectReason(t, sv.listen, "evil.example"); r != "not_allowlisted" {
		t.Fatalf("a refused duplicate changed the served policy: %s", r)
	}
	if _, err := os.Stat(filepath.Join(f.root, "weather.sock")); err == nil {
		t.Fatal("a refused duplicate opened its listener")
	}
	sv.stop(t)
	if log, _ := os.ReadFile(f.audit); strings.Contains(string(log), "audit_mode") || strings.Contains(sv.stderr.String(), "exemption in force") {
		t.Fatalf("a refused duplicate's exemptions were announced:\n%s\n%s", log, sv.stderr.String())
	}

	out, _, code := runCLI(t, "check", "--config", f.cfg)
	if code != exitFail || !strings.Contains(out, "this manifest is already served on 127.0.0.1:0") {
		t.Fatalf("check --config: exit %d: %s", code, out)
	}
	_, errs, code := runCLI(t, "serve", "--config", f.cfg)
	if code == exitOK || !strings.Contains(errs, "already served") {
		t.Fatalf("serve started with the duplicate: exit %d: %s", code, errs)
	}
}

// TestServeReloadAnnouncesAndWithdrawsExemptions is issue 18.6: an
// exemption a reload adds is announced as at start (stderr, lifecycle
// event, egressd_exemptions 1), and one a reload removes is withdrawn
// (event, metric 0).
func TestServeReloadAnnouncesAndWithdrawsExemptions(t *testing.T) {
	f := newReloadFixture(t)
	f.write(t, "", "")
	sv := startServe(t, "--config", f.cfg)
	admin := waitFor(t, &sv.stderr, `admin on (127\.0\.0\.1:\d+)`)[1]
	metric := func(name string) string {
		resp, err := http.Get("http://" + admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`egressd_exemptions\{exemption="` + regexp.QuoteMeta(name) + `",integration="com.test.weather"\} (\d)`).FindSubmatch(body)
		if m == nil {
			return "absent"
		}
		return string(m[1])
	}

	f.write(t, "    mode: audit\n    allow_ports: [8443]\n", "")
	sv.sig <- syscall.SIGHUP
	waitFor(t, &sv.stderr, `warning: exemption in force for com.test.weather: allow_port:8443`)
	waitFor(t, &sv.stderr, `warning: exemption in force for com.test.weather: audit_mode`)
	waitFor(t, &lockedFile{path: f.audit}, `"event":"lifecycle","integration":"com.test.weather",.*"exemption":"audit_mode","action":"exemption"`)
	if a, p := metric("audit_mode"), metric("allow_port:8443"); a != "1" || p != "1" {
		t.Fatalf("egressd_exemptions audit_mode=%s allow_port=%s", a, p)
	}
	if r := connectReason(t, sv.listen, "evil.example"); r == "not_allowlisted" {
		t.Fatal("the announced audit mode is not in force")
	}

	f.write(t, "    allow_ports: [8443]\n", "")
	sv.sig <- syscall.SIGHUP
	waitFor(t, &sv.stderr, `warning: exemption withdrawn for com.test.weather: audit_mode`)
	waitFor(t, &lockedFile{path: f.audit}, `"exemption":"audit_mode","action":"exemption_withdrawn"`)
	if a, p := metric("audit_mode"), metric("allow_port:8443"); a != "0" || p != "1" {
		t.Fatalf("after withdrawal: egressd_exemptions audit_mode=%s allow_port=%s", a, p)
	}
	if n := strings.Count(sv.stderr.String(), "exemption in force for com.test.weather: allow_port:8443"); n != 1 {
		t.Fatalf("allow_port:8443 announced %d times, want once:\n%s", n, sv.stderr.String())
	}
	sv.stop(t)
}

// TestServeReloadThatLoosensPolicyIsAnnounced is the attack of a reload
// adding widen: auto and dropping deny.hosts: a pending widening and an
// operator-denied host were released with no stderr line and only a
// "policy loaded" audit line. Each loosening is announced like an
// exemption (stderr warning and lifecycle event), and the released
// widening says widen: auto let it in.
func TestServeReloadThatLoosensPolicyIsAnnounced(t *testing.T) {
	f := newReloadFixture(t)
	f.write(t, "", "deny:\n  hosts: [blocked.example.com]\n")
	sv := startServe(t, "--config", f.cfg)
	weather := filepath.Join(f.root, "integrations", "weather", "manifest.json")
	os.WriteFile(weather, weatherManifest("2.0.0", `"api.weather.example","evil.example","blocked.example.com"`), 0o600)
	sv.sig <- syscall.SIGHUP
	waitFor(t, &sv.stderr, `waits for the operator's approval`)

	f.write(t, "    widen: auto\n", "")
	sv.sig <- syscall.SIGHUP
	waitFor(t, &sv.stderr, `warning: .*deny\.hosts no longer denies blocked\.example\.com`)
	waitFor(t, &sv.stderr, `warning: exemption in force for com\.test\.weather: widen:auto`)
	waitFor(t, &sv.stderr, `warning: com\.test\.weather 2\.0\.0 adds .*evil\.example.* widen: auto let it in without the operator's approval`)
	waitFor(t, &lockedFile{path: f.audit}, `"action":"deny_withdrawn"`)
	waitFor(t, &lockedFile{path: f.audit}, `"exemption":"widen:auto","action":"exemption"`)
	if r := connectReason(t, sv.listen, "evil.example"); r == "not_allowlisted" || r == "pending_approval" {
		t.Fatalf("the announced widening is not in force: %s", r)
	}
	sv.stop(t)
}
