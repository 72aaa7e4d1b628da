package main

import (
	"strings"
	"testing"
)

// TestOneApproveOfAnIDTwoFoldersChangedToDoesNotReleaseBothLists is the
// attack of one "egressd approve ID VERSION" releasing two lists: a hostile
// folder and a legitimate one both change their id to com.acme.new 1.0.0,
// the hostile one with exfil.example.net added. The approval must refuse,
// list both pending records, and bind only the one the operator names.
func TestOneApproveOfAnIDTwoFoldersChangedToDoesNotReleaseBothLists(t *testing.T) {
	state, hostile, legit := t.TempDir(), t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, hostile, "com.evil.tool", "1.0.0", "api.example.com"))
	loadAsServe(t, state, erpFolder(t, legit, "com.acme.old", "1.0.0", "api.example.com"))
	loadAsServe(t, state, erpFolder(t, legit, "com.acme.new", "1.0.0", "api.example.com"))
	loadAsServe(t, state, erpFolder(t, hostile, "com.acme.new", "1.0.0", "api.example.com", "exfil.example.net"))

	out, errs, code := runCLI(t, "approve", "--yes", "--state", state, "com.acme.new", "1.0.0")
	if code != exitFail || !strings.Contains(errs, hostile) || !strings.Contains(errs, legit) || !strings.Contains(errs, "--manifest PATH") {
		t.Fatalf("one approve for two different lists: exit %d: %s %s", code, out, errs)
	}
	if out, _, _ := runCLI(t, "explain", "--manifest", hostile, "--state", state, "exfil.example.net"); strings.HasPrefix(out, "allow") {
		t.Fatalf("a refused approval released the hostile list: %s", out)
	}

	out, errs, code = runCLI(t, "approve", "--yes", "--state", state, "--manifest", legit)
	if code != exitOK || !strings.Contains(out, "the id change of "+legit+" from com.acme.old") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	if out, _, _ := runCLI(t, "explain", "--manifest", hostile, "--state", state, "exfil.example.net"); strings.HasPrefix(out, "allow") {
		t.Fatalf("approving the legitimate folder released the hostile list: %s", out)
	}
	// Only the hostile record is left pending: its digest names one list.
	out, errs, code = runCLI(t, "approve", "--yes", "--state", state, "--folder", hostile, "--digest", digestOf(t, hostile), "com.acme.new", "1.0.0")
	if code != exitOK || strings.Count(out, "approved ") != 1 || !strings.Contains(out, hostile) {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
}

// TestApproveManifestShowsTheListItBinds is issue 13's b4: "approve
// --manifest" bound a list without showing it, so a file swapped between
// the review and the command was approved unseen. It prints the entries it
// binds and what they add over the list in force.
func TestApproveManifestShowsTheListItBinds(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "erp.acme.example"))
	erpFolder(t, dir, "com.acme.erp", "1.1.0", "erp.acme.example", "exfil.attacker.example")
	out, errs, code := runCLI(t, "approve", "--yes", "--state", state, "--manifest", dir)
	if code != exitOK || !strings.Contains(out, "(a widening)") ||
		!strings.Contains(out, "  binds the list: erp.acme.example exfil.attacker.example\n") ||
		!strings.Contains(out, "  adds over com.acme.erp 1.0.0: exfil.attacker.example\n") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	// An id change shows what it adds over the folder's old id's list.
	erpFolder(t, dir, "com.acme.erp2", "1.0.0", "erp.acme.example", "other.example")
	out, errs, code = runCLI(t, "approve", "--yes", "--state", state, "--manifest", dir)
	if code != exitOK || !strings.Contains(out, "the id change of "+dir+" from com.acme.erp") ||
		!strings.Contains(out, "  adds over com.acme.erp 1.0.0: other.example\n") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
}

// TestApproveAndStateTakeFlagsAfterTheirArguments is issue 13's b10: the
// operator types "egressd approve ID VERSION --state DIR" (as many CLIs
// allow) and got bare usage with exit 2, no word on what was wrong. Flags
// are read wherever they stand.
func TestApproveAndStateTakeFlagsAfterTheirArguments(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "erp.acme.example"))
	erpFolder(t, dir, "com.acme.erp", "1.1.0", "erp.acme.example", "new.acme.example")
	loadAsServe(t, state, dir)
	out, errs, code := runCLI(t, "state", "list", "--state", state)
	if code != exitOK || !strings.Contains(out, "1.1.0 pending") {
		t.Fatalf("state list --state: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = runCLI(t, "approve", "--yes", "com.acme.erp", "1.1.0", "--state", state, "--digest", digestOf(t, dir))
	if code != exitOK || !strings.Contains(out, "approved com.acme.erp 1.1.0") {
		t.Fatalf("approve ID VERSION --state --digest: exit %d\n%s%s", code, out, errs)
	}
	if _, errs, code := runCLI(t, "state", "forget", "--state", state, "com.acme.erp"); code != exitOK {
		t.Fatalf("state forget --state ID: exit %d\n%s", code, errs)
	}
}

// TestEveryApproveCommandApprovePrintsNamesItsState: "approve ID VERSION"
// without --digest (and a digest that names nothing) printed approve
// commands without --state; pasted as root for a staging state folder they
// approved in /var/lib/egressd, the production memory (round 16 trust-chain
// attacker, LOW). Every command egressd prints names the memory it read.
func TestEveryApproveCommandApprovePrintsNamesItsState(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "erp.acme.example"))
	erpFolder(t, dir, "com.acme.erp", "1.1.0", "erp.acme.example", "new.acme.example")
	loadAsServe(t, state, dir)
	for _, args := range [][]string{
		{"approve", "--yes", "--state", state, "com.acme.erp", "1.1.0"},
		{"approve", "--yes", "--state", state, "--digest", "sha256:0000", "com.acme.erp", "1.1.0"},
	} {
		_, errs, code := runCLI(t, args...)
		if code == exitOK || !strings.Contains(errs, "egressd approve --state "+state+" --digest "+digestOf(t, dir)+" com.acme.erp 1.1.0") {
			t.Fatalf("%v: exit %d; every printed approve command must name --state %s:\n%s", args, code, state, errs)
		}
		if strings.Count(errs, "egressd approve --") != strings.Count(errs, "egressd approve --state "+state) {
			t.Fatalf("%v: an approve command without --state:\n%s", args, errs)
		}
	}
}

// TestAClaimBelowTheIDsVersionIsRefusedNotHeldForAnApprovalNoLoadApplies:
// a folder claimed com.acme.erp at a version below the one version memory
// had seen for it; the claim was held pending, "approve" bound it and
// said so, and every load then refused it as a lower version (round 16
// trust-chain attacker, LOW: approve, state list and load disagreed). The
// claim is refused at load like any lower version, and an approval of a
// claim the id's record has since passed is refused too.
func TestAClaimBelowTheIDsVersionIsRefusedNotHeldForAnApprovalNoLoadApplies(t *testing.T) {
	state, a, b := t.TempDir(), t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, a, "com.acme.erp", "2.0.0", "erp.acme.example"))
	out := loadAsServe(t, state, erpFolder(t, b, "com.acme.erp", "1.0.0", "erp.acme.example"))
	if out.Err == nil || !strings.Contains(out.Err.Error(), "version 1.0.0 is lower than 2.0.0") {
		t.Fatalf("a claim below the id's version: %+v", out)
	}
	if list, _, _ := runCLI(t, "state", "--state", state, "list"); strings.Contains(list, b) {
		t.Fatalf("the refused claim was recorded:\n%s", list)
	}

	// A claim at the id's version waits; then the id moves on from its own folder.
	loadAsServe(t, state, erpFolder(t, b, "com.acme.erp", "2.0.0", "erp.acme.example"))
	loadAsServe(t, state, erpFolder(t, a, "com.acme.erp", "3.0.0", "erp.acme.example"))
	_, errs, code := runCLI(t, "approve", "--yes", "--state", state, "--folder", b, "--digest", digestOf(t, b), "com.acme.erp", "2.0.0")
	if code != exitFail || !strings.Contains(errs, "cannot load, so it is not approvable") || !strings.Contains(errs, "seen com.acme.erp 3.0.0") { // round 45 F5: named as what cannot load
		t.Fatalf("approving a claim below the id's version: exit %d\n%s", code, errs)
	}
	_, errs, code = runCLI(t, "approve", "--yes", "--state", state, "--manifest", b)
	if code != exitFail || !strings.Contains(errs, "lower than 3.0.0") {
		t.Fatalf("approve --manifest of a claim below the id's version: exit %d\n%s", code, errs)
	}
}

// TestStateListSaysAClaimTheIDHasPassedCannotLoad: a claim held at 2.0.0
// stayed in state list with an approve command after the id reached
// 3.0.0, a command approve then refused (round 17 trust-chain attacker,
// minor). state list says it cannot load and how to drop it.
func TestStateListSaysAClaimTheIDHasPassedCannotLoad(t *testing.T) {
	state, a, b := t.TempDir(), t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, a, "com.acme.erp", "2.0.0", "erp.acme.example"))
	loadAsServe(t, state, erpFolder(t, b, "com.acme.erp", "2.0.0", "erp.acme.example"))
	loadAsServe(t, state, erpFolder(t, a, "com.acme.erp", "3.0.0", "erp.acme.example"))
	list := stateList(t, state)
	if !strings.Contains(list, "cannot load, so it is not approvable: version memory has seen com.acme.erp 3.0.0") ||
		!strings.Contains(list, "egressd state --state "+state+" forget --folder "+b) || strings.Contains(list, "--folder "+b+" --digest") {
		t.Fatalf("state list of a claim the id has passed:\n%s", list)
	}
}
