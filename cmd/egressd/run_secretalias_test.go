package main

import (
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
