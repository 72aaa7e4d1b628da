package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunAGuessListASandboxedCurlPostsIsRefusedAndQuarantinesBrokering: the
// round-24 attack with the real binary: a sandboxed curl posts a list of
// candidate keys (the real one among them) to the bound host, which shows
// the program's data back, and looks for the line that came back as its
// placeholder. The request is refused 403 secret_guessed, nothing comes
// back, a later request with the placeholder to the bound host is refused
// too, and the audit log names the secret, never its value.
func TestRunAGuessListASandboxedCurlPostsIsRefusedAndQuarantinesBrokering(t *testing.T) {
	skipUntilBrokerBuilt(t)
	e := newBoundSecretEnv(t)
	var cands []string
	for i := range 300 {
		cands = append(cands, fmt.Sprintf("sk-live-DISTINCT-%010x", i*7919))
	}
	cands[137] = brokeredValue
	bound := "https://api.bound.example:" + e.rec.port
	script := `cat > /tmp/g <<'XEOF'
` + strings.Join(cands, "\n") + `
XEOF
curl -sS -m 10 -o /tmp/r -w "guess=%{http_code}\n" --data-binary @/tmp/g ` + bound + `/notes
grep -c "^$ACME_KEY\$" /tmp/r | sed 's/^/placeholder_lines=/'
curl -sS -m 10 -o /dev/null -w "after=%{http_code}\n" -H "X-Api-Key: $ACME_KEY" ` + bound + `/echo`
	out, errs, code := runCmd(t, e.secretCommand([]string{"--secret", "ACME_KEY=api.bound.example", "--upstream-ca", filepath.Join(e.dir, "ca.pem")}, script))
	if code != 0 || !strings.Contains(out, "guess=403") || !strings.Contains(out, "placeholder_lines=0") || !strings.Contains(out, "after=403") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	log := e.auditLog()
	if !strings.Contains(log, `"reason":"secret_guessed"`) || !strings.Contains(log, "secret ACME_KEY") {
		t.Errorf("the audit log does not record the guess by the secret's name:\n%s", log)
	}
	if strings.Contains(out, brokeredValue) || strings.Contains(errs, brokeredValue) || strings.Contains(log, brokeredValue) {
		t.Error("the value reached the program, stderr or the audit log")
	}
}
