package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// secondFolder is another integration folder beside e's, sharing its state
// directory, DNS and origin, whose manifest claims id at version.
func (e *sandboxEnv) secondFolder(id, version string) *sandboxEnv {
	e.t.Helper()
	b := *e
	b.dir = e.t.TempDir()
	os.Chmod(b.dir, 0o755)
	os.WriteFile(filepath.Join(b.dir, "ca.pem"), e.ca.PEM(), 0o644)
	b.writeSandboxed(id, version, "api.allowed.example")
	return &b
}

// TestRunSecondFolderClaimingAnotherIDDoesNotGetItsState is issue 12's
// open High: a hostile integration in another folder whose manifest claims
// a victim's id was given the victim's state folder (and, as root, its
// image and uid), so it read and poisoned what the victim stored. Its claim
// waits for the operator, and its state is its own.
func TestRunSecondFolderClaimingAnotherIDDoesNotGetItsState(t *testing.T) {
	a := newSandboxEnv(t)
	a.writeSandboxed("com.test.sandboxed", "1.0.0", "api.allowed.example")
	a.runFresh(`echo secret-of-a > /var/lib/integration/secret`)

	b := a.secondFolder("com.test.sandboxed", "1.0.0")
	steal := `cat /var/lib/integration/secret 2>&1; echo poison > /var/lib/integration/secret; echo planted > /var/lib/integration/planted; echo rc=$?`
	for range 2 { // two processes: the claim is not a first load in either
		out, errs, code := b.run(steal)
		if strings.Contains(out, "secret-of-a") {
			t.Fatalf("the second folder read the first one's state:\n%s", out)
		}
		if code != 0 || !strings.Contains(errs, b.dir) || !strings.Contains(errs, a.dir) ||
			!strings.Contains(errs, "egressd approve --state "+b.state+" --folder "+b.dir+" --digest "+digestOf(t, b.dir)+" com.test.sandboxed 1.0.0") || !strings.Contains(errs, "egressd state --state "+b.state+" forget com.test.sandboxed") {
			t.Fatalf("the claim is not stated with both folders and the way out: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
		}
	}
	if log := a.auditLog(); !strings.Contains(log, `"action":"pending","pending":"1.0.0"`) {
		t.Fatalf("audit log has no pending policy event:\n%s", log)
	}

	out, errs, _ := a.runFresh(`cat /var/lib/integration/secret; if test -e /var/lib/integration/planted; then echo planted found; fi`)
	if out != "secret-of-a\n" {
		t.Fatalf("the first folder's state changed:\nstdout:\n%s\nstderr:\n%s", out, errs)
	}
	list, err := exec.Command(egressdBinary(t), "state", "--state", a.state, "list").CombinedOutput()
	if err != nil || !strings.Contains(string(list), "com.test.sandboxed 1.0.0 in force (1 entries); bound to folder "+a.dir) {
		t.Fatalf("state list does not show the folder the id is bound to: %v\n%s", err, list)
	}
}

// TestRunSecondFolderClaimingAnotherIDCannotRaiseItsVersionFloor: the same
// hostile folder loaded the victim's id at a higher version, and version
// memory then refused the victim's own, lower version: a lock-out. A
// pending claim raises no floor.
func TestRunSecondFolderClaimingAnotherIDCannotRaiseItsVersionFloor(t *testing.T) {
	a := newSandboxEnv(t)
	a.writeSandboxed("com.test.sandboxed", "1.0.0", "api.allowed.example")
	a.runFresh(`true`)

	b := a.secondFolder("com.test.sandboxed", "9.0.0")
	_, errs, _ := b.run(`true`)
	if !strings.Contains(errs, "egressd approve --state "+b.state+" --folder "+b.dir+" --digest "+digestOf(t, b.dir)+" com.test.sandboxed 9.0.0") {
		t.Errorf("the claim at 9.0.0 is not pending:\n%s", errs)
	}

	out, errs, code := a.run(`curl -sS -m 10 --cacert ca.pem ` + a.url("api.allowed.example"))
	if code != 0 || !strings.Contains(out, "hello from api.allowed.example") {
		t.Fatalf("the first folder's own version no longer runs: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	list, _ := exec.Command(egressdBinary(t), "state", "--state", a.state, "list").CombinedOutput()
	if !regexp.MustCompile(`folder \S+ claims com.test.sandboxed 9.0.0, bound to folder \S+; pending, digest sha256:[0-9a-f]+: egressd approve --state \S+ --folder \S+ --digest sha256:[0-9a-f]+ com.test.sandboxed 9.0.0\n`).Match(list) {
		t.Fatalf("state list:\n%s", list)
	}
}

// TestRunStateUnderTheIDAloneGoesOnlyToTheFolderThatOwnsIt: an earlier
// egressd kept state under the id alone. It moves to the folder version
// memory binds the id to, and to no folder that merely claims the id, nor
// to any folder when version memory binds the id to none.
func TestRunStateUnderTheIDAloneGoesOnlyToTheFolderThatOwnsIt(t *testing.T) {
	a := newSandboxEnv(t)
	legacy := filepath.Join(a.state, "sandbox", "com.test.sandboxed") // an earlier egressd's name
	os.MkdirAll(legacy, 0o700)
	os.WriteFile(filepath.Join(legacy, "secret"), []byte("legacy-secret\n"), 0o600)
	read := `cat /var/lib/integration/secret 2>/dev/null || echo none`

	unbound := *a // version memory in another state directory binds the id to no folder
	unbound.state = t.TempDir()
	os.MkdirAll(filepath.Join(unbound.state, "sandbox", "com.test.sandboxed"), 0o700)
	os.WriteFile(filepath.Join(unbound.state, "sandbox", "com.test.sandboxed", "secret"), []byte("legacy-secret\n"), 0o600)
	if out, errs, _ := unbound.runFresh(read); out != "none\n" {
		t.Fatalf("state of the id alone went to a folder version memory does not bind:\n%s\n%s", out, errs)
	}

	a.bindID()
	b := a.secondFolder("com.test.sandboxed", "1.0.0")
	if out, errs, _ := b.runFresh(read); out != "none\n" {
		t.Fatalf("state of the id alone went to a folder claiming the id:\n%s\n%s", out, errs)
	}
	if _, err := os.Stat(filepath.Join(legacy, "secret")); err != nil {
		t.Fatalf("a claim moved the state of the id alone: %v", err)
	}
	if out, errs, _ := a.runFresh(read); out != "legacy-secret\n" {
		t.Fatalf("the owner did not get its state back:\n%s\n%s", out, errs)
	}
	if _, err := os.Lstat(legacy); !os.IsNotExist(err) {
		t.Fatalf("the id-only folder is still there: %v", err)
	}
}

// TestRunStateSurvivesADeployLinkSwap: the folder is the path the operator
// names, so "ln -sfn releases/v2 current" is the same integration with the
// same state, not a new folder claiming its id.
func TestRunStateSurvivesADeployLinkSwap(t *testing.T) {
	e := newSandboxEnv(t)
	root := t.TempDir()
	os.Chmod(root, 0o755)
	for v, version := range map[string]string{"v1": "1.0.0", "v2": "1.0.1"} {
		r := *e
		r.dir = filepath.Join(root, v)
		os.Mkdir(r.dir, 0o755)
		os.WriteFile(filepath.Join(r.dir, "ca.pem"), e.ca.PEM(), 0o644)
		r.writeSandboxed("com.test.sandboxed", version, "api.allowed.example")
	}
	e.dir = filepath.Join(root, "current")
	os.Symlink("v1", e.dir)
	e.runFresh(`echo kept > /var/lib/integration/file`)
	os.Symlink("v2", e.dir+".tmp")
	os.Rename(e.dir+".tmp", e.dir)
	out, errs, _ := e.runFresh(`cat /var/lib/integration/file`)
	if out != "kept\n" || strings.Contains(errs, "claims the id") {
		t.Fatalf("after the deploy link moved:\nstdout:\n%s\nstderr:\n%s", out, errs)
	}
}

// toFirstLayout rewrites the version memory in dir as an egressd from
// before folder binding wrote it: records by id alone, no folders.
func toFirstLayout(t *testing.T, dir string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "versions.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		IDs json.RawMessage `json:"ids"`
	}
	if err := json.Unmarshal(data, &doc); err != nil || len(doc.IDs) == 0 {
		t.Fatalf("versions.json: %v\n%s", err, data)
	}
	if err := os.WriteFile(filepath.Join(dir, "versions.json"), doc.IDs, 0o600); err != nil {
		t.Fatal(err)
	}
	// An earlier egressd wrote no newest-write mark in versions.lock.
	if err := os.Truncate(filepath.Join(dir, "versions.lock"), 0); err != nil {
		t.Fatal(err)
	}
}

// TestRunLegacyIDIsNotHandedToTheFirstFolderThatClaimsIt is the attacker's
// upgrade take-over: version memory from an earlier egressd binds an id to
// no folder, and a hostile folder claiming it was bound to it by its first
// run (even one that failed), then adopted the id's state folder (as root
// its image and uid: the victim's secret was read and poisoned) and raised
// the floor to 9.0.0, locking the victim out even after approval. Now
// every folder's run waits for the operator to name the id's folder, and
// only that folder inherits the state; the hostile folder gets nothing.
func TestRunLegacyIDIsNotHandedToTheFirstFolderThatClaimsIt(t *testing.T) {
	a := newSandboxEnv(t)
	a.writeSandboxed("com.test.sandboxed", "1.0.0", "api.allowed.example")
	a.bindID()
	toFirstLayout(t, a.state)
	legacy := filepath.Join(a.state, "sandbox", "com.test.sandboxed") // the earlier egressd's state
	os.MkdirAll(legacy, 0o700)
	os.WriteFile(filepath.Join(legacy, "secret"), []byte("victim-secret\n"), 0o600)

	b := a.secondFolder("com.test.sandboxed", "9.0.0")
	steal := `cat /var/lib/integration/secret 2>&1; echo poison > /var/lib/integration/secret`
	for range 2 {
		out, errs, code := b.run(steal)
		if strings.Contains(out, "victim-secret") || code == 0 ||
			!strings.Contains(errs, "version memory binds com.test.sandboxed to no folder") ||
			!strings.Contains(errs, "egressd approve --state "+b.state+" --manifest "+b.dir) {
			t.Fatalf("the hostile folder's claim of an unbound id: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
		}
	}
	a.writeSandboxed("com.test.sandboxed", "1.1.0", "api.allowed.example")
	if _, errs, code := a.run(`true`); code == 0 || !strings.Contains(errs, "egressd approve --state "+a.state+" --manifest "+a.dir) {
		t.Fatalf("the victim's folder ran before the operator named it: exit %d\n%s", code, errs)
	}
	if out, err := exec.Command(egressdBinary(t), "approve", "--yes", "--state", a.state, "--manifest", a.dir).CombinedOutput(); err != nil {
		t.Fatalf("approve --manifest: %v\n%s", err, out)
	}
	out, errs, _ := a.runFresh(`cat /var/lib/integration/secret`)
	if out != "victim-secret\n" {
		t.Fatalf("the approved folder did not inherit the id's state:\nstdout:\n%s\nstderr:\n%s", out, errs)
	}
	if _, errs, _ := b.run(steal); !strings.Contains(errs, "egressd approve --state "+b.state+" --folder "+b.dir+" --digest "+digestOf(t, b.dir)+" com.test.sandboxed 9.0.0") {
		t.Fatalf("the hostile claim after the binding:\n%s", errs)
	}
	list, _ := exec.Command(egressdBinary(t), "state", "--state", a.state, "list").CombinedOutput()
	if !strings.Contains(string(list), "com.test.sandboxed 1.1.0 in force (1 entries); bound to folder "+a.dir) {
		t.Fatalf("state list:\n%s", list)
	}
}

// TestRunDeployLinkPointedAtTheVictimIsAClaim is the attacker's deploy-link
// take-over end to end: the hostile integration's own link ".../current"
// points at the victim's folder for its first run, which bound the link to
// the victim's id (and its state); flipped to a release claiming the id at
// 99.0.0 it raised the floor, and the victim's next release was refused.
func TestRunDeployLinkPointedAtTheVictimIsAClaim(t *testing.T) {
	a := newSandboxEnv(t)
	a.writeSandboxed("com.test.sandboxed", "1.0.0", "api.allowed.example")
	a.runFresh(`echo victim-secret > /var/lib/integration/secret`)

	evil := *a
	root := t.TempDir()
	os.Chmod(root, 0o755)
	evil.dir = filepath.Join(root, "v2")
	os.Mkdir(evil.dir, 0o755)
	evil.writeSandboxed("com.test.sandboxed", "99.0.0", "api.allowed.example", "evil.example")
	evil.dir = filepath.Join(root, "current")
	os.Symlink(a.dir, evil.dir)
	out, errs, _ := evil.run(`cat /var/lib/integration/secret 2>&1`)
	if strings.Contains(out, "victim-secret") || !strings.Contains(errs, "claims the id com.test.sandboxed 1.0.0") {
		t.Fatalf("the link to the victim's folder was taken as that folder:\nstdout:\n%s\nstderr:\n%s", out, errs)
	}
	os.Remove(evil.dir)
	os.Symlink("v2", evil.dir)
	if _, errs, _ := evil.run(`true`); !strings.Contains(errs, "claims the id com.test.sandboxed 99.0.0") {
		t.Fatalf("the flipped link:\n%s", errs)
	}

	a.writeSandboxed("com.test.sandboxed", "1.1.0", "api.allowed.example")
	out, errs, code := a.run(`cat /var/lib/integration/secret; curl -sS -m 10 --cacert ca.pem ` + a.url("api.allowed.example"))
	if code != 0 || !strings.Contains(out, "victim-secret") || !strings.Contains(out, "hello from api.allowed.example") {
		t.Fatalf("the victim's next release: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}
