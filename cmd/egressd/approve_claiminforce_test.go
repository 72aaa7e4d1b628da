package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/egressd/egressd/policy"
)

// TestApprovingAClaimSaysTheIDsApprovedListIsWhatWillBeInForce is the
// eleventh attacker's fifth break: folder a widened com.acme.erp to 2.0.0
// (pending), folder b copied a's manifest and claims the id. Approving
// b's claim said "binds the list: … evil.example" and "applies at the
// next load", but at that load b runs under 1.0.0's list, since the id's
// widening still waits. approve now says what will be in force and that
// the widening still waits, with the command that approves it.
func TestApprovingAClaimSaysTheIDsApprovedListIsWhatWillBeInForce(t *testing.T) {
	state, a, b := t.TempDir(), t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, a, "com.acme.erp", "1.0.0", "api.acme.example"))
	loadAsServe(t, state, erpFolder(t, a, "com.acme.erp", "2.0.0", "api.acme.example", "evil.example"))
	claim := loadAsServe(t, state, erpFolder(t, b, "com.acme.erp", "2.0.0", "api.acme.example", "evil.example"))
	cmd := regexp.MustCompile(`(egressd approve --state \S+ --folder \S+ --digest \S+ com\.acme\.erp 2\.0\.0) lets this folder`).FindStringSubmatch(claim.Notice)
	if claim.Result != policy.Pending || cmd == nil {
		t.Fatalf("b's claim does not wait with a command: %+v", claim)
	}
	out, errs, code := runCLI(t, append(strings.Fields(cmd[1])[1:], "--yes")...) // no terminal here to confirm on
	if code != exitOK {
		t.Fatalf("approve of the claim: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "in force at the next load: com.acme.erp 1.0.0 (api.acme.example)") ||
		!strings.Contains(out, "com.acme.erp 2.0.0 still waits for approval") || strings.Contains(out, "applies at the next load") {
		t.Fatalf("approve of a claim whose id's widening waits does not say what will be in force:\n%s", out)
	}
	if next := loadAsServe(t, state, b); next.Result != policy.Pending || !strings.Contains(next.Notice, "the last approved list stays in force") {
		t.Fatalf("what approve said is not what the next load does: %+v", next)
	}
}
