package main

import (
	"encoding/base64"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunSecretValueUnderAnotherDeclaredNameDoesNotCross: only the bound
// NAME was dropped from the launcher's environment; a manifest that also
// declared ACME_TOKEN and ACME_URL received the operator's shell's copies
// of the same value (ACME_TOKEN=V, ACME_URL=https://u:V@…) as they were,
// and egressd said nothing (round 14 broker attacker). A crossing variable
// whose value holds a bound secret's value is held back, with a warning
// naming it and the secret, never the value.
func TestRunSecretValueUnderAnotherDeclaredNameDoesNotCross(t *testing.T) {
	e := newBoundSecretEnv(t)
	os.WriteFile(filepath.Join(e.dir, "voiceos.integration.json"), []byte(`{"schemaVersion":1,"id":"com.test.secret","version":"1.0.0",
	"runtime":{"kind":"local-mcp","command":"sh","args":["-c","echo runtime ran"]},
	"auth":{"kind":"apiKey","fields":[{"key":"ACME_KEY","label":"k","secret":true},{"key":"ACME_TOKEN","label":"t"},{"key":"ACME_URL","label":"u"},{"key":"ACME_REGION","label":"r"}]},
	"permissions":[{"kind":"network","domains":["api.bound.example","plain.bound.example"]}]}`), 0o644)
	cmd := e.secretCommand([]string{"--secret", "ACME_KEY=api.bound.example"},
		`for f in /proc/[0-9]*/environ; do tr '\0' '\n' < $f 2>/dev/null; done | grep -c '`+brokeredValuePattern+`' | sed 's/^/environ_hits=/'; echo "region=$ACME_REGION token=${ACME_TOKEN:-unset} url=${ACME_URL:-unset}"`)
	cmd.Env = append(cmd.Env, "ACME_TOKEN="+brokeredValue, "ACME_URL=https://u:"+brokeredValue+"@api.bound.example/", "ACME_REGION=eu")
	out, errs, code := runCmd(t, cmd)
	if code != 0 || !strings.Contains(out, "environ_hits=0") || !strings.Contains(out, "region=eu token=unset url=unset") {
		t.Fatalf("exit %d, want no hit and only ACME_REGION crossing:\n%s%s", code, out, errs)
	}
	for _, name := range []string{"ACME_TOKEN", "ACME_URL"} {
		if !strings.Contains(errs, name+" holds the value of the bound secret ACME_KEY") {
			t.Errorf("no warning names %s:\n%s", name, errs)
		}
	}
	if strings.Contains(errs+out, brokeredValue) {
		t.Fatalf("the value was printed:\n%s%s", out, errs)
	}
}

// TestRunSecretEncodedUnderAnotherDeclaredNameDoesNotCross: a variable
// holding the bound value verbatim was held back, but one holding it
// percent-encoded in a URL (ACME_URL=https://user:sk-live%2FA15…@) or
// base64-encoded in a Basic token (ACME_BASIC) crossed into the sandbox
// (round 19 attacker, issue 15). The program prints its environment: no
// form of the value is in it, and stderr names each carrier and its form.
func TestRunSecretEncodedUnderAnotherDeclaredNameDoesNotCross(t *testing.T) {
	const v = "sk-live/A15+secret=9f3c2a7e51"
	e := newBoundSecretEnv(t)
	os.WriteFile(filepath.Join(e.dir, "voiceos.integration.json"), []byte(`{"schemaVersion":1,"id":"com.test.secret","version":"1.0.0",
	"runtime":{"kind":"local-mcp","command":"sh","args":["-c","echo runtime ran"]},
	"auth":{"kind":"apiKey","fields":[{"key":"ACME_KEY","label":"k","secret":true},{"key":"ACME_URL","label":"u"},{"key":"ACME_QUERY","label":"q"},{"key":"ACME_BASIC","label":"b"},{"key":"ACME_BLOB","label":"x"},{"key":"ACME_REGION","label":"r"}]},
	"permissions":[{"kind":"network","domains":["api.bound.example"]}]}`), 0o644)
	cmd := e.secretCommand([]string{"--secret", "ACME_KEY=api.bound.example"}, `env; echo "region=$ACME_REGION"`)
	carriers := map[string]string{
		"ACME_URL":   "https://user:" + url.PathEscape(v) + "@api.bound.example/",
		"ACME_QUERY": "https://api.bound.example/?k=" + url.QueryEscape(v),
		"ACME_BASIC": "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+v)),
		"ACME_BLOB":  base64.RawURLEncoding.EncodeToString([]byte("{\"k\":\"" + v + "\"}")),
	}
	cmd.Env = append(cmd.Env, "ACME_KEY="+v, "ACME_REGION=eu") // the last ACME_KEY is the one exec passes
	for k, val := range carriers {
		cmd.Env = append(cmd.Env, k+"="+val)
	}
	out, errs, code := runCmd(t, cmd)
	if code != 0 || !strings.Contains(out, "region=eu") {
		t.Fatalf("exit %d:\n%s%s", code, out, errs)
	}
	for k, val := range carriers {
		if strings.Contains(out, k+"=") || strings.Contains(out, val) {
			t.Errorf("%s crossed into the sandbox:\n%s", k, out)
		}
		if !strings.Contains(errs, k+" holds the value of the bound secret ACME_KEY") {
			t.Errorf("no warning names %s:\n%s", k, errs)
		}
	}
	for _, form := range []string{"percent-encoded", "base64-encoded"} {
		if !strings.Contains(errs, form) {
			t.Errorf("no warning says %s:\n%s", form, errs)
		}
	}
	if strings.Contains(out+errs, v) || strings.Contains(out+errs, url.PathEscape(v)) {
		t.Fatalf("the value was printed:\n%s%s", out, errs)
	}
}
