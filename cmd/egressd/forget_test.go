package main

import (
	"strings"
	"testing"

	"github.com/egressd/egressd/policy"
)

// TestForgettingTheOldIDDoesNotReleaseAPendingIDChange is issue 13's B7:
// a folder bound to com.acme.erp changes its id to com.acme.erp2 and adds
// exfil.example.com (pending); the operator retires the old id with state
// forget; the next load of com.acme.erp2 was a first load, with the exfil
// host. forget now refuses while a folder bound to the id holds a pending
// id change, and says what to do; forgetting the new id names the pending
// change it drops.
func TestForgettingTheOldIDDoesNotReleaseAPendingIDChange(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "a.example.com"))
	erpFolder(t, dir, "com.acme.erp2", "1.0.0", "a.example.com", "exfil.example.com")
	if o := loadAsServe(t, state, dir); o.Result != policy.Pending {
		t.Fatalf("id change: %+v", o)
	}

	_, errs, code := runCLI(t, "state", "--state", state, "forget", "com.acme.erp")
	if code != exitFail || !strings.Contains(errs, "id change to com.acme.erp2 1.0.0") || !strings.Contains(errs, "waits for approval") {
		t.Fatalf("forget of the old id: exit %d: %s", code, errs)
	}
	if o := loadAsServe(t, state, dir); o.Result != policy.Pending {
		t.Fatalf("after forget of the old id the new id loads as %s", o.Result)
	}

	out, errs, code := runCLI(t, "state", "--state", state, "forget", "com.acme.erp2")
	if code != exitOK || !strings.Contains(out, "dropped the pending id change of "+policy.ManifestPlace(dir+"/manifest.json")+" to com.acme.erp2 1.0.0") {
		t.Fatalf("forget of the new id: exit %d: %s %s", code, out, errs)
	}
	if o := loadAsServe(t, state, dir); o.Result != policy.Pending {
		t.Fatalf("after forget of the new id it loads as %s", o.Result)
	}
}

// TestForgettingTheOldIDAfterAnApprovedRenameDoesNotReleaseAWidenedNewID is
// the sixth attacker's b1: folder a changes its id com.acme.a → com.acme.b,
// the operator approves that change (--folder --digest), the author ships
// com.acme.b 2.0.0 with evil.attacker.example before any load, and the
// operator forgets com.acme.a. forget dropped the folder's binding with its
// approved change, so the next load was a first load of com.acme.b with
// the widened list. forget now refuses while the change waits to load, and
// the next load stays an id change that the approval does not cover.
func TestForgettingTheOldIDAfterAnApprovedRenameDoesNotReleaseAWidenedNewID(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.a", "1.0.0", "api.a.example"))
	erpFolder(t, dir, "com.acme.b", "1.0.0", "api.a.example")
	if o := loadAsServe(t, state, dir); o.Result != policy.Pending {
		t.Fatalf("id change: %+v", o)
	}
	folder := policy.ManifestPlace(dir + "/manifest.json")
	if _, errs, code := runCLI(t, "approve", "--yes", "--state", state, "--folder", folder, "--digest", digestOf(t, dir), "com.acme.b", "1.0.0"); code != exitOK {
		t.Fatalf("approve the id change: exit %d: %s", code, errs)
	}
	erpFolder(t, dir, "com.acme.b", "2.0.0", "api.a.example", "evil.attacker.example")

	_, errs, code := runCLI(t, "state", "--state", state, "forget", "com.acme.a")
	if code != exitFail || strings.Count(strings.TrimSuffix(errs, "\n"), "\n") != 0 || !strings.Contains(errs, "approved id change to com.acme.b 1.0.0") {
		t.Fatalf("forget of the old id with an approved change not loaded: exit %d: %q", code, errs)
	}
	if o := loadAsServe(t, state, dir); o.Result != policy.Pending {
		t.Fatalf("after forget, com.acme.b 2.0.0 loads as %s", o.Result)
	}
	if out, _, _ := runCLI(t, "explain", "--manifest", dir, "--state", state, "evil.attacker.example"); strings.HasPrefix(out, "allow") {
		t.Fatalf("the widened new id is in force: %s", out)
	}
}

// TestForgetRefusesWhileAnotherFolderClaimsTheID: the rollback advice
// ("forget the id deliberately") dropped another folder's pending claim of
// the id; that folder then loaded first, as a first load, and its wider
// list was in force with no approval (round 17 trust-chain attacker).
// forget now refuses while a claim of the id waits, naming it and the way
// to drop it: "state forget --folder", which removes only what version
// memory holds for that folder (its later loads need approval again).
func TestForgetRefusesWhileAnotherFolderClaimsTheID(t *testing.T) {
	state, owner, claimant := t.TempDir(), t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, owner, "com.acme.erp", "2.1.0", "erp.acme.example"))
	if o := loadAsServe(t, state, erpFolder(t, claimant, "com.acme.erp", "3.0.0", "erp.acme.example", "evil.example")); o.Result != policy.Pending {
		t.Fatalf("claim: %+v", o)
	}
	_, errs, code := runCLI(t, "state", "--state", state, "forget", "com.acme.erp")
	if code != exitFail || !strings.Contains(errs, claimant) || !strings.Contains(errs, "egressd state --state "+state+" forget --folder "+claimant) {
		t.Fatalf("forget with a claim waiting: exit %d\n%s", code, errs)
	}
	if list := stateList(t, state); !strings.Contains(list, "com.acme.erp 2.1.0 in force") {
		t.Fatalf("a refused forget changed version memory:\n%s", list)
	}
	out, errs, code := runCLI(t, "state", "--state", state, "forget", "--folder", claimant)
	if code != exitOK || !strings.Contains(out, "forgot folder "+claimant) {
		t.Fatalf("forget --folder: exit %d\n%s%s", code, out, errs)
	}
	if list := stateList(t, state); strings.Contains(list, claimant) || !strings.Contains(list, "bound to folder "+owner) {
		t.Fatalf("forget --folder left the claim or dropped the owner:\n%s", list)
	}
	if out, errs, code = runCLI(t, "state", "--state", state, "forget", "com.acme.erp"); code != exitOK {
		t.Fatalf("forget once the claim is gone: exit %d\n%s%s", code, out, errs)
	}
	// Forgetting the owner's folder binding leaves the id bound to no
	// folder: a folder that loads it next waits for approval.
	loadAsServe(t, state, erpFolder(t, owner, "com.acme.erp", "2.2.0", "erp.acme.example"))
	runCLI(t, "state", "--state", state, "forget", "--folder", owner)
	if o := loadAsServe(t, state, erpFolder(t, claimant, "com.acme.erp", "3.0.0", "erp.acme.example", "evil.example")); o.Result != policy.Pending {
		t.Fatalf("after forget --folder of the owner, a claim loaded: %+v", o)
	}
}

// TestForgetFolderRefusesWhileAnIDChangeWaitsThere: forget --folder of a
// folder bound to com.acme.erp whose manifest changed its id (to a new id,
// adding a host) dropped the binding with the change, and the next load
// took the new id as a first load, its list in force (round 22
// trust-chain attacker). As forget ID does, forget --folder refuses while
// an id change waits there.
func TestForgetFolderRefusesWhileAnIDChangeWaitsThere(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "erp.acme.example"))
	if o := loadAsServe(t, state, erpFolder(t, dir, "com.acme.evil", "2.0.0", "erp.acme.example", "exfil.example")); o.Result != policy.Pending {
		t.Fatalf("id change: %+v", o)
	}
	_, errs, code := runCLI(t, "state", "--state", state, "forget", "--folder", dir)
	if code != exitFail || !strings.Contains(errs, "id change") {
		t.Fatalf("forget --folder with an id change waiting: exit %d\n%s", code, errs)
	}
	if o := loadAsServe(t, state, dir); o.Result != policy.Pending {
		t.Fatalf("after the refused forget, the id change loaded: %+v", o)
	}
}

// TestForgetAfterTheIDIsRestoredSaysALoadMustSeeItFirst: the refusals of
// forget --folder and forget ID while an id change waits said "or restore
// the manifest's id, first", and after the operator restored it both were
// still refused: version memory holds the change until a load sees the id
// restored (round 25 trust-chain attacker, LOW). forget does not read the
// manifest itself: the author can restore the id for the forget and change
// it again after, and the folder, unbound, would then load the new id as
// a first load. The refusals say a load must see the id restored, and
// once one has, both work.
func TestForgetAfterTheIDIsRestoredSaysALoadMustSeeItFirst(t *testing.T) {
	for _, forget := range [][]string{{"forget", "--folder", ""}, {"forget", "com.acme.erp"}} {
		state, dir := t.TempDir(), t.TempDir()
		if forget[len(forget)-1] == "" {
			forget[len(forget)-1] = dir
		}
		loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "erp.acme.example"))
		if o := loadAsServe(t, state, erpFolder(t, dir, "com.acme.evil", "2.0.0", "erp.acme.example", "exfil.example")); o.Result != policy.Pending {
			t.Fatalf("id change: %+v", o)
		}
		erpFolder(t, dir, "com.acme.erp", "1.0.0", "erp.acme.example") // the operator restores the id
		args := append([]string{"state", "--state", state}, forget...)
		_, errs, code := runCLI(t, args...)
		if code != exitFail || !strings.Contains(errs, "restore the manifest's id and let egressd load it (a reload of serve, or the next run), which drops the change") {
			t.Fatalf("%v with the id restored but not loaded: exit %d; the refusal must say a load has to see it\n%s", forget, code, errs)
		}
		if o := loadAsServe(t, state, dir); o.Result != policy.Loaded {
			t.Fatalf("the restored id's load: %+v", o)
		}
		if _, errs, code := runCLI(t, args...); code != exitOK {
			t.Fatalf("%v after a load saw the id restored: exit %d\n%s", forget, code, errs)
		}
	}
}
