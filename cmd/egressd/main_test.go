package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestCheckExamples(t *testing.T) {
	out, _, code := runCLI(t, "check", "../../configs/examples/coffee-tracker", "../../configs/examples/acme-erp/manifest.json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, out)
	}
	for _, want := range []string{
		"voiceos.integration.json: ok com.you.coffee-tracker 1.0.0 (voiceos) entries: api.coffee.example *.cdn.coffee.example digest: sha256:",
		"manifest.json: ok com.acme.erp 2.4.1 (sollar) entries: erp.acme.example *.cdn.acme.example digest: sha256:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

func TestCheckHostileManifest(t *testing.T) {
	out, _, code := runCLI(t, "check", "../../configs/examples/hostile")
	if code != exitFail {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{
		`hostile/voiceos.integration.json: permissions[0].domains[1]: bare IP addresses are not allowed ("169.254.169.254")`,
		`hostile/voiceos.integration.json: permissions[0].domains[3]: wildcard covers a public suffix, where anyone can register names; list each host you need ("*.co.uk")`,
		`hostile/voiceos.integration.json: warning: permissions[0].domains[9]: duplicate entry "api.tracker.example"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, ": ok ") {
		t.Errorf("a manifest with errors was reported ok:\n%s", out)
	}
}

func TestCheckJSON(t *testing.T) {
	out, _, code := runCLI(t, "check", "--json", "../../configs/examples/hostile", "../../configs/examples/acme-erp")
	var reports []checkReport
	if err := json.Unmarshal([]byte(out), &reports); err != nil {
		t.Fatal(err)
	}
	if code != exitFail || len(reports) != 2 || reports[0].Valid || len(reports[0].Errors) != 8 || !reports[1].Valid {
		t.Fatalf("exit %d, reports %+v", code, reports)
	}
}

func TestCheckUsageAndMissingFile(t *testing.T) {
	if _, _, code := runCLI(t, "check"); code != exitUsage {
		t.Fatalf("no args: exit %d", code)
	}
	out, _, code := runCLI(t, "check", filepath.Join(t.TempDir(), "nope"))
	if code != exitFail || !strings.Contains(out, "no such file or directory") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

func TestCheckConfig(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "egressd.yaml")
	os.WriteFile(bad, []byte("integrations:\n  - manifest: x\n    listen: 0.0.0.0:3128\n    ports: [80]\n"), 0o600)
	out, _, code := runCLI(t, "check", "--config", bad)
	if code != exitFail || !strings.Contains(out, `egressd.yaml: integrations[0].ports: unknown field "ports"`) {
		t.Fatalf("exit %d: %s", code, out)
	}
	out, _, code = runCLI(t, "check", "--config", "../../configs/egressd.yaml")
	if code != exitOK || !strings.Contains(out, "ok config, 2 integrations") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

func TestExplain(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		code   int
		output string
	}{
		{"allowed_by_wildcard", []string{"img.cdn.coffee.example"}, exitOK,
			"allow allowed img.cdn.coffee.example:443\nrule: *.cdn.coffee.example\negressd: img.cdn.coffee.example is allowed for com.you.coffee-tracker 1.0.0 by the entry \"*.cdn.coffee.example\"\n"},
		{"denied_not_listed", []string{"evil.example:443"}, exitFail,
			"deny not_allowlisted evil.example:443\nrule: none matched; the manifest lists: api.coffee.example *.cdn.coffee.example\negressd: evil.example is not in the network permission of com.you.coffee-tracker 1.0.0 (add it to permissions[].domains)\n"},
		{"denied_ip_literal", []string{"169.254.169.254"}, exitFail,
			"deny ip_literal \"169.254.169.254:443\"\nrule: none matched; the manifest lists: api.coffee.example *.cdn.coffee.example\negressd: IP addresses cannot be reached directly; connect by a hostname listed in the network permission of com.you.coffee-tracker 1.0.0\n"},
		{"denied_port", []string{"api.coffee.example:80"}, exitFail,
			"deny port_not_allowed api.coffee.example:80\nrule: none matched; the manifest lists: api.coffee.example *.cdn.coffee.example\negressd: port 80 is not allowed for com.you.coffee-tracker 1.0.0; egressd carries https on port 443 only\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runCLI(t, append([]string{"explain", "--manifest", "../../configs/examples/coffee-tracker"}, tc.args...)...)
			if code != tc.code || out != tc.output {
				t.Fatalf("exit %d (want %d)\n got: %q\nwant: %q\nstderr: %s", code, tc.code, out, tc.output, errs)
			}
		})
	}
}

func TestExplainAppliesConfigExemptionsAndDenies(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "egressd.yaml")
	os.WriteFile(cfg, []byte(`deny:
  hosts: ["img.*.coffee.example"]
integrations:
  - manifest: `+mustAbs(t, "../../configs/examples/coffee-tracker")+`
    listen: 127.0.0.1:3128
    allow_ports: [8443]
`), 0o600)
	out, _, code := runCLI(t, "explain", "--manifest", "../../configs/examples/coffee-tracker", "--config", cfg, "img.cdn.coffee.example")
	if code != exitFail || !strings.HasPrefix(out, "deny operator_denied img.cdn.coffee.example:443\nrule: deny.hosts: img.*.coffee.example\n") {
		t.Fatalf("exit %d: %s", code, out)
	}
	out, _, code = runCLI(t, "explain", "--manifest", "../../configs/examples/coffee-tracker", "--config", cfg, "api.coffee.example:8443")
	if code != exitOK || !strings.Contains(out, "exemption: allow_port:8443\n") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

func TestVersionAndUnknownCommand(t *testing.T) {
	if out, _, code := runCLI(t, "version"); code != exitOK || !strings.HasPrefix(out, "egressd ") {
		t.Fatalf("version: %d %q", code, out)
	}
	if _, _, code := runCLI(t, "frobnicate"); code != exitUsage {
		t.Fatalf("unknown command: exit %d", code)
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestCheckConfigWarnsWhenOneIntegrationCanFillTheGlobalCap: serve warned
// at start when the integrations' own caps add up past
// limits.max_connections, but check --config said nothing.
func TestCheckConfigWarnsWhenOneIntegrationCanFillTheGlobalCap(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "a"), 0o755)
	os.MkdirAll(filepath.Join(dir, "b"), 0o755)
	os.WriteFile(filepath.Join(dir, "b", "manifest.json"), weatherManifest("1.0.0", `"b.example.com"`), 0o644)
	os.WriteFile(filepath.Join(dir, "a", "manifest.json"), []byte(`{"manifest_version":1,"id":"com.test.a","version":"1.0.0","network":{"connect":["a.example.com"]}}`), 0o644)
	cfg := filepath.Join(dir, "egressd.yaml")
	os.WriteFile(cfg, []byte("state_dir: "+filepath.Join(dir, "state")+"\nlimits:\n  max_connections: 900\n  max_tunnels: 460\n  max_handshakes: 16\nintegrations:\n  - manifest: a\n    listen: 127.0.0.1:0\n  - manifest: b\n    listen: 127.0.0.1:0\n"), 0o600)
	out, _, code := runCLI(t, "check", "--config", cfg)
	if !strings.Contains(out, "exceed the global cap of 900 connections") {
		t.Fatalf("exit %d, no shared cap warning: %s", code, out)
	}
}
