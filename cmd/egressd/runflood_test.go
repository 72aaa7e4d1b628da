package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunIdleFloodOnTheSandboxProxyIsBoundedFromAccept: connections to
// egressd run's in-sandbox proxy that never sent a request were counted
// against nothing (18,000 of them took the supervisor to 18,017
// descriptors). The run's proxy takes the same accept path as serve's: a
// connection takes a handshake slot at accept, and past
// limits.max_handshakes it is closed at once and audited, folded. The
// child opens 40 idle connections with max_handshakes 8: the last is
// closed by egressd (EOF), 32 refusals are audited, and once the child
// lets its 8 go, its CONNECT is served (retried: egressd sees the 8 close
// asynchronously, so curl may come first and be refused at accept).
func TestRunIdleFloodOnTheSandboxProxyIsBoundedFromAccept(t *testing.T) {
	e := newSandboxEnv(t)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash for /dev/tcp")
	}
	cfg := filepath.Join(t.TempDir(), "egressd.yaml")
	os.WriteFile(cfg, []byte("limits: {max_handshakes: 8}\n"), 0o600)
	script := `proxy=${HTTPS_PROXY#http://}; host=${proxy%:*}; port=${proxy##*:}
for i in $(seq 10 49); do eval "exec $i<>/dev/tcp/$host/$port" || exit 9; done
read -t 30 -u 49; echo "last read rc=$?"
for i in $(seq 10 49); do eval "exec $i>&-"; done
curl -sS -m 10 --retry 8 --retry-all-errors --cacert ca.pem ` + e.url("api.allowed.example") + `; echo; echo curl rc=$?`
	cmd := exec.Command(egressdBinary(t), "run", "--config", cfg, "--state", e.state, "--audit-log", e.audit, "--resolver", e.dns.Addr,
		"--allow-private", "127.0.0.2/32", "--allow-port", e.port, e.dir, "--", "/bin/bash", "-c", script)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "last read rc=1") || !strings.Contains(string(out), "hello from api.allowed.example") {
		t.Fatalf("%v:\n%s", err, out)
	}
	// Its own line names the refusal in msg; a summary lists it in its
	// folded sample (a refusal without a host folds by its sentence).
	const atAccept = "connection closed at accept"
	refused := int64(0)
	for _, r := range e.auditRecords() {
		if r.Suppressed == 0 && strings.HasPrefix(r.Msg, atAccept) {
			refused++
		}
		for _, f := range r.Folded {
			if strings.HasPrefix(f.Target, atAccept) {
				refused += f.Count
			}
		}
	}
	// curl may come before egressd has seen the 8 close, and be refused
	// (and audited) too, then retry: at most its 8 retries more.
	if refused < 32 || refused > 32+8 {
		t.Fatalf("%d refusals at accept audited, want 32 (and at most curl's 8 retries):\n%s", refused, e.auditLog())
	}
}
