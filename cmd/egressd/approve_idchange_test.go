package main

import (
	"strings"
	"testing"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/policy"
)

// TestApprovingAnIDChangeShowsTheListItBinds is issue 13's f13g item 1: a
// folder bound to com.acme.erp changes its id to com.acme.erp2 with
// exfil.attacker.example added, and another folder claims com.acme.erp
// with its own list. The operator was shown only a digest for each and
// approved a list it never saw. Now approve ID VERSION and state list show
// the list each binds, as egressd loaded it, and what it adds over the
// list in force it replaces; the approval itself prints the same.
func TestApprovingAnIDChangeShowsTheListItBinds(t *testing.T) {
	state, dir, other := t.TempDir(), t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "api.acme.example"))
	erpFolder(t, dir, "com.acme.erp2", "1.0.0", "api.acme.example", "exfil.attacker.example")
	if o := loadAsServe(t, state, dir); o.Result != policy.Pending {
		t.Fatalf("id change: %+v", o)
	}
	m, _, _, err := allowlist.Load(dir, &allowlist.Rules{})
	if err != nil || m == nil {
		t.Fatal(err)
	}
	changed := m.Digest()
	erpFolder(t, dir, "com.acme.erp2", "1.0.0", "api.acme.example")                            // the author swaps the file after the load
	erpFolder(t, other, "com.acme.erp", "1.1.0", "api.acme.example", "claim.attacker.example") // above the id's version: a claim at it with another list is refused
	if o := loadAsServe(t, state, other); o.Result != policy.Pending {
		t.Fatalf("claim: %+v", o)
	}
	place := policy.ManifestPlace(dir + "/manifest.json")

	_, errs, code := runCLI(t, "approve", "--yes", "--state", state, "com.acme.erp2", "1.0.0")
	for _, want := range []string{
		"the id change of " + place + " from com.acme.erp",
		"binds the list: api.acme.example exfil.attacker.example",
		"adds over com.acme.erp 1.0.0: exfil.attacker.example",
	} {
		if code != exitFail || !strings.Contains(errs, want) {
			t.Fatalf("approve ID VERSION does not show %q: exit %d\n%s", want, code, errs)
		}
	}
	list, _, _ := runCLI(t, "state", "--state", state, "list")
	for _, want := range []string{
		"folder " + place + " (was com.acme.erp) changes its id to com.acme.erp2 1.0.0",
		"binds the list: api.acme.example exfil.attacker.example",
		"adds over com.acme.erp 1.0.0: exfil.attacker.example",
		"binds the list: api.acme.example claim.attacker.example",
		// The claim puts com.acme.erp's list in force for other, whose own
		// widening to claim.attacker.example then still waits (round 27).
		"in force at the next load: com.acme.erp 1.0.0 (api.acme.example); com.acme.erp 1.1.0 still waits for approval",
		"adds over nothing in force for the folder: api.acme.example",
	} {
		if !strings.Contains(list, want) {
			t.Fatalf("state list does not show %q:\n%s", want, list)
		}
	}
	out, errs, code := runCLI(t, "approve", "--yes", "--state", state, "--folder", dir, "--digest", changed, "com.acme.erp2", "1.0.0")
	if code != exitOK || !strings.Contains(out, "binds the list: api.acme.example exfil.attacker.example") || !strings.Contains(out, "adds over com.acme.erp 1.0.0: exfil.attacker.example") {
		t.Fatalf("approve --folder --digest: exit %d\n%s%s", code, out, errs)
	}
}

// TestExplainWhileAnIDChangeWaitsNamesTheOldIDInForce is issue 13's f13g
// item 2: while a folder's id change to com.acme.erp2 waits, explain
// --state said a host was "allowed for com.acme.erp2 1.0.0", an id the
// operator never approved, although serve enforces com.acme.erp's list.
// It now names the list in force and the change that waits, with the
// command that shows and approves it.
func TestExplainWhileAnIDChangeWaitsNamesTheOldIDInForce(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "api.acme.example", "legacy.acme.example"))
	erpFolder(t, dir, "com.acme.erp2", "1.0.0", "api.acme.example", "exfil.attacker.example")
	if o := loadAsServe(t, state, dir); o.Result != policy.Pending {
		t.Fatalf("id change: %+v", o)
	}
	inForce := "in force: the list approved for com.acme.erp 1.0.0; the id change to com.acme.erp2 1.0.0 waits for approval: egressd approve --state " + state + " --folder " + dir + " --digest " + digestOf(t, dir) + " com.acme.erp2 1.0.0"
	for _, c := range []struct {
		host, verdict, says string
		code                int
	}{
		{"api.acme.example", "allow allowed", "is allowed for com.acme.erp 1.0.0, the list in force for this folder", exitOK},
		{"legacy.acme.example", "allow allowed", "is allowed for com.acme.erp 1.0.0, the list in force for this folder", exitOK},
		{"exfil.attacker.example", "deny pending_approval", "until then the list of com.acme.erp 1.0.0 applies", exitFail},
		{"other.example", "deny not_allowlisted", "is not in the network permission of com.acme.erp 1.0.0", exitFail},
	} {
		out, errs, code := runCLI(t, "explain", "--state", state, "--manifest", dir, c.host)
		if code != c.code || !strings.HasPrefix(out, c.verdict) || !strings.Contains(out, c.says) || !strings.Contains(out, inForce) {
			t.Fatalf("explain %s: exit %d\n%s%s", c.host, code, out, errs)
		}
		if strings.Contains(out, "allowed for com.acme.erp2") || strings.Contains(out, "permission of com.acme.erp2") {
			t.Fatalf("explain %s names the waiting id as in force:\n%s", c.host, out)
		}
	}
}
