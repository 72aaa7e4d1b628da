package main

import (
	"strings"
	"testing"

	"github.com/egressd/egressd/allowlist"
)

// TestApproveByIDAndVersionShowsThePendingListAndNeedsItsDigest is issue
// 13's B2: egressd loaded an evil 2.0.0 (pending), the author swapped the
// file for an innocent 2.0.0, the operator reviewed that file and ran the
// printed "egressd approve ID 2.0.0", which approved the evil digest. Now
// state list shows what the pending list adds and its digest; approve ID
// VERSION shows the same and approves nothing without --digest; and
// --manifest with the swapped file says it is not the list that waits.
func TestApproveByIDAndVersionShowsThePendingListAndNeedsItsDigest(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "api.acme.example"))
	erpFolder(t, dir, "com.acme.erp", "2.0.0", "api.acme.example", "exfil.attacker.example")
	loadAsServe(t, state, dir)
	m, _, _, err := allowlist.Load(dir, &allowlist.Rules{})
	if err != nil || m == nil {
		t.Fatal(err)
	}
	evil := m.Digest()
	erpFolder(t, dir, "com.acme.erp", "2.0.0", "api.acme.example", "cdn.acme.example") // the swap

	out, _, code := runCLI(t, "state", "--state", state, "list")
	if code != exitOK || !strings.Contains(out, "2.0.0 pending, digest "+evil+", adds exfil.attacker.example") {
		t.Fatalf("state list: exit %d\n%s", code, out)
	}
	out, errs, code := runCLI(t, "approve", "--yes", "--state", state, "com.acme.erp", "2.0.0")
	if code != exitFail || !strings.Contains(errs, "adds exfil.attacker.example") || !strings.Contains(errs, "egressd approve --state "+state+" --digest "+evil+" com.acme.erp 2.0.0") {
		t.Fatalf("approve without --digest: exit %d\n%s%s", code, out, errs)
	}
	_, errs, code = runCLI(t, "approve", "--yes", "--state", state, "--manifest", dir)
	if code != exitFail || !strings.Contains(errs, "is not the list that waits for approval") || !strings.Contains(errs, evil) {
		t.Fatalf("approve --manifest of the swapped file: exit %d\n%s", code, errs)
	}
	erpFolder(t, dir, "com.acme.erp", "2.0.0", "api.acme.example", "exfil.attacker.example") // swapped back
	if out, _, _ := runCLI(t, "explain", "--state", state, "--manifest", dir, "exfil.attacker.example"); !strings.HasPrefix(out, "deny pending_approval") {
		t.Fatalf("approved without the digest: %s", out)
	}
	out, errs, code = runCLI(t, "approve", "--yes", "--state", state, "--digest", evil, "com.acme.erp", "2.0.0")
	if code != exitOK || !strings.Contains(out, "approved com.acme.erp 2.0.0, list digest "+evil) {
		t.Fatalf("approve --digest: exit %d\n%s%s", code, out, errs)
	}
}
