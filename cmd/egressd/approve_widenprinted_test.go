package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/egressd/egressd/policy"
)

// TestTheWideningWarningsApproveCommandApprovesAsPrinted is the eleventh
// attacker's fourth break: serve's and run's widening warning printed
// "egressd approve ID VERSION", without the load's --state and without
// the digest approve needs, so pasted it failed or approved nothing. The
// command now names both; run by a shell as printed, it approves, and the
// next load has the widened list in force.
func TestTheWideningWarningsApproveCommandApprovesAsPrinted(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "api.acme.example"))
	out := loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.1.0", "api.acme.example", "evil.example"))
	cmd := regexp.MustCompile(`waits for the operator's approval \((egressd approve [^)]*)\)`).FindStringSubmatch(out.Notice)
	if cmd == nil || !strings.Contains(cmd[1], "--state "+state) || !strings.Contains(cmd[1], "--digest sha256:") {
		t.Fatalf("the widening warning's command does not name the state and the digest: %s", out.Notice)
	}
	sh := exec.Command("/bin/sh", "-c", cmd[1]+" --yes") // no terminal here to confirm on
	sh.Env = append(os.Environ(), "PATH="+filepath.Dir(egressdBinary(t))+":"+os.Getenv("PATH"))
	msg, err := sh.CombinedOutput()
	if err != nil || !strings.Contains(string(msg), "approved com.acme.erp 1.1.0") {
		t.Fatalf("the printed command %q: %v\n%s", cmd[1], err, msg)
	}
	// approve said the widening it had just approved "still waits" and
	// that the old list would be in force (round 12 trust-chain attacker).
	if strings.Contains(string(msg), "still waits") {
		t.Fatalf("approve says the widening it approved still waits:\n%s", msg)
	}
	if next := loadAsServe(t, state, dir); next.Result != policy.Loaded || next.Version != "1.1.0" {
		t.Fatalf("the approved widening is not in force at the next load: %+v", next)
	}
}
