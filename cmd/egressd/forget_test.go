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
