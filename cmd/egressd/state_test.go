package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/policy"
)

// erpFolder is an integration folder holding com.acme.erp at version with
// hosts, as a Sollar manifest.
func erpFolder(t *testing.T, dir, id, version string, hosts ...string) string {
	t.Helper()
	doc := `{"manifest_version":1,"id":"` + id + `","version":"` + version + `","network":{"connect":["` + strings.Join(hosts, `","`) + `"]}}`
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// loadAsServe loads dir with version memory in state, as serve does.
func loadAsServe(t *testing.T, state, dir string) policy.Outcome {
	t.Helper()
	mem, err := policy.OpenMemory(state)
	if err != nil {
		t.Fatal(err)
	}
	cfg := policy.DefaultConfig()
	cfg.Integrations = []policy.Integration{{Manifest: dir, Listen: "127.0.0.1:0"}}
	return policy.NewRegistry(mem, nil).Load(cfg)[0]
}

// TestApproveRefusesATypoAndAVersionItHasNotSeen is issue 18.7 from the
// command line: approving an id never seen, or a version not seen, fails
// and says why; an approval says the digest it bound.
func TestApproveRefusesATypoAndAVersionItHasNotSeen(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	stateFile := filepath.Join(state, "versions.json")
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "erp.acme.example"))

	missing := filepath.Join(state, "typo")
	_, errs, code := runCLI(t, "approve", "--yes", "--state", missing, "com.acme.erp", "1.1.0")
	if _, err := os.Stat(missing); code != exitFail || err == nil || !strings.Contains(errs, "no version memory at "+missing) {
		t.Fatalf("a mistyped --state: exit %d: %s", code, errs)
	}
	_, errs, code = runCLI(t, "approve", "--yes", "--state", state, "com.acme.rep", "1.1.0")
	if code != exitFail || !strings.Contains(errs, "com.acme.rep is not in version memory ("+stateFile+")") {
		t.Fatalf("typo approved: exit %d: %s", code, errs)
	}
	_, errs, code = runCLI(t, "approve", "--yes", "--state", state, "com.acme.erp", "1.1.0")
	if code != exitFail || !strings.Contains(errs, "egressd has not seen com.acme.erp 1.1.0") || !strings.Contains(errs, "--manifest PATH") {
		t.Fatalf("unseen version approved: exit %d: %s", code, errs)
	}
	// Given as a manifest, the approval binds that manifest's list.
	other := erpFolder(t, t.TempDir(), "com.acme.erp", "1.1.0", "erp.acme.example", "new.acme.example")
	out, errs, code := runCLI(t, "approve", "--yes", "--state", state, "--manifest", other)
	if code != exitOK || !strings.Contains(out, "approved com.acme.erp 1.1.0, list digest sha256:") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	// Another list at 1.1.0 is not the one approved.
	erpFolder(t, dir, "com.acme.erp", "1.1.0", "erp.acme.example", "evil.example")
	if o := loadAsServe(t, state, dir); o.Result != policy.Pending {
		t.Fatalf("another list at the approved version: %+v", o)
	}
	_, errs, code = runCLI(t, "approve", "--yes", "--state", state, "--manifest", erpFolder(t, t.TempDir(), "com.acme.new", "1.0.0", "x.example"))
	if code != exitFail || !strings.Contains(errs, "--new-id") {
		t.Fatalf("unknown id approved: exit %d: %s", code, errs)
	}
}

// TestPendingWideningIsVisible is issue 13.3: explain --state decides as
// serve does, state list shows what waits and the command that approves
// it, and state forget names the file it changed.
func TestPendingWideningIsVisible(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	stateFile := filepath.Join(state, "versions.json")
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "erp.acme.example"))
	erpFolder(t, dir, "com.acme.erp", "1.1.0", "erp.acme.example", "new.acme.example")
	if o := loadAsServe(t, state, dir); o.Result != policy.Pending {
		t.Fatalf("%+v", o)
	}
	before, _ := os.ReadFile(stateFile)

	out, errs, code := runCLI(t, "explain", "--manifest", dir, "--state", state, "new.acme.example")
	want := "deny pending_approval new.acme.example:443\nrule: new.acme.example\n" +
		"egressd: new.acme.example is in the list of com.acme.erp 1.1.0, which waits for the operator's approval: egressd approve --state " + state + " --digest " + digestOf(t, dir) + " com.acme.erp 1.1.0; until then the last approved list applies\n" +
		"pending: com.acme.erp 1.1.0 adds new.acme.example to its network list (list digest " + digestOf(t, dir) + "); it waits for the operator's approval (egressd approve --state " + state + " --digest " + digestOf(t, dir) + " com.acme.erp 1.1.0), and the last approved list stays in force until then\n"
	if code != exitFail || out != want {
		t.Fatalf("exit %d\n got: %q\nwant: %q\n%s", code, out, want, errs)
	}
	if after, _ := os.ReadFile(stateFile); string(after) != string(before) {
		t.Fatal("explain --state wrote version memory")
	}

	out, _, code = runCLI(t, "state", "--state", state, "list")
	if code != exitOK || !strings.HasPrefix(out, "version memory: "+stateFile) ||
		!strings.Contains(out, "com.acme.erp 1.0.0 in force (1 entries); bound to folder "+dir+"; 1.1.0 pending, digest sha256:") ||
		!strings.Contains(out, ": egressd approve --state "+state+" --digest "+digestOf(t, dir)+" com.acme.erp 1.1.0") {
		t.Fatalf("exit %d: %s", code, out)
	}

	// The version in force typed by mistake: the one waiting is named
	// (session 9's leftover: only "1.0.0 is in force" was said).
	if _, errs, code := runCLI(t, "approve", "--yes", "--state", state, "com.acme.erp", "1.0.0"); code != exitFail ||
		!strings.Contains(errs, "com.acme.erp 1.0.0 is not pending: com.acme.erp 1.0.0 is in force, and 1.1.0 waits for approval, list digest "+digestOf(t, dir)) {
		t.Fatalf("approve of the version in force: exit %d: %s", code, errs)
	}
	out, _, code = runCLI(t, "approve", "--yes", "--state", state, "--digest", digestOf(t, dir), "com.acme.erp", "1.1.0")
	if code != exitOK || !strings.Contains(out, "(a widening) in "+stateFile) {
		t.Fatalf("exit %d: %s", code, out)
	}
	if out, _, _ := runCLI(t, "explain", "--manifest", dir, "--state", state, "new.acme.example"); !strings.HasPrefix(out, "allow allowed") {
		t.Fatalf("approved widening: %s", out)
	}
	// Approved, not loaded yet (session 9's leftover: state list still
	// said "pending" and printed the approve command again).
	out, _, code = runCLI(t, "state", "--state", state, "list")
	if code != exitOK || !strings.Contains(out, "com.acme.erp 1.0.0 in force (1 entries); bound to folder "+dir+"; 1.1.0 approved, applies at the next load, digest "+digestOf(t, dir)+", adds new.acme.example") ||
		strings.Contains(out, "pending") || strings.Contains(out, "egressd approve") {
		t.Fatalf("state list after approve, before the load: exit %d: %s", code, out)
	}

	out, _, code = runCLI(t, "state", "--state", state, "forget", "com.acme.erp")
	if code != exitOK || out != "forgot com.acme.erp (highest version seen: 1.1.0) in "+stateFile+"; its next load is a first load, with any list\n" {
		t.Fatalf("exit %d: %q", code, out)
	}
	_, errs, code = runCLI(t, "state", "--state", state, "forget", "com.acme.erp")
	if code != exitFail || !strings.Contains(errs, "com.acme.erp is not in version memory ("+stateFile+")") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

// TestStateListShowsNoApprovalTheVersionInForceHasPassed is round 42's
// F2: after 2.0.0's widening was approved and loaded, a narrowing 3.0.0,
// then 3.0.1 widening to 2.0.0's list again, state list printed "3.0.1
// pending, digest D …; approved 2.0.0 for digest D": the same digest,
// read as if the waiting widening were approved. Approvals at or below
// the version in force are history and are not listed.
func TestStateListShowsNoApprovalTheVersionInForceHasPassed(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "a.acme.example"))
	erpFolder(t, dir, "com.acme.erp", "2.0.0", "a.acme.example", "b.acme.example")
	loadAsServe(t, state, dir)
	if out, errs, code := runCLI(t, "approve", "--yes", "--state", state, "--digest", digestOf(t, dir), "com.acme.erp", "2.0.0"); code != exitOK {
		t.Fatalf("approve 2.0.0: exit %d\n%s%s", code, out, errs)
	}
	loadAsServe(t, state, dir)
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "3.0.0", "a.acme.example"))
	erpFolder(t, dir, "com.acme.erp", "3.0.1", "a.acme.example", "b.acme.example")
	if o := loadAsServe(t, state, dir); o.Result != policy.Pending {
		t.Fatalf("3.0.1: %+v", o)
	}
	out, _, code := runCLI(t, "state", "--state", state, "list")
	if code != exitOK || !strings.Contains(out, "com.acme.erp 3.0.0 in force (1 entries)") || !strings.Contains(out, "3.0.1 pending, digest "+digestOf(t, dir)) || strings.Contains(out, "approved 2.0.0") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// loadOnListener loads dir on the listener listen with version memory in
// state, as serve does.
func loadOnListener(t *testing.T, state, dir, listen string) policy.Outcome {
	t.Helper()
	mem, err := policy.OpenMemory(state)
	if err != nil {
		t.Fatal(err)
	}
	cfg := policy.DefaultConfig()
	cfg.Integrations = []policy.Integration{{Manifest: dir, Listen: listen}}
	return policy.NewRegistry(mem, nil).Load(cfg)[0]
}

func mkdir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// digestOf is the list digest of the manifest in dir.
func digestOf(t *testing.T, dir string) string {
	t.Helper()
	m, _, _, err := allowlist.Load(dir, &allowlist.Rules{})
	if err != nil || m == nil {
		t.Fatalf("%s: %v", dir, err)
	}
	return m.Digest()
}

// TestStateListEscapesAHandEditedKey is the sixth attacker's b3: the
// service user's versions.json held an id key with OSC and CSI sequences
// and a newline; "state list" printed it raw to root's terminal through
// its "corrupt" error. Every field is escaped, and the error is one line.
func TestStateListEscapesAHandEditedKey(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "a.example.com"))
	file := filepath.Join(state, "versions.json")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	evil := `"\u001b]0;all clear\u0007\u001b[2J\n\u001b[32mnothing pending": {}, "com.acme.erp"`
	if err := os.WriteFile(file, []byte(strings.Replace(string(data), `"com.acme.erp"`, evil, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errs, code := runCLI(t, "state", "--state", state, "list")
	if code != exitFail || strings.ContainsAny(out+errs, "\x1b\x07") || strings.Count(errs, "\n") != 1 {
		t.Fatalf("exit %d: %q %q", code, out, errs)
	}
}

// TestAnIDChangeThatCannotLoadIsNotOfferedForApproval is round 45's F5:
// folder m changed its id from com.acme.x to com.acme.y 1.0.0 (waiting),
// then folder m2 loaded com.acme.y 1.0.0 first. state list said m's change
// "cannot load, so it is not approvable" and, beside it, that com.acme.y
// 1.0.0 "still waits for approval"; approve com.acme.y 1.0.0 offered m's
// change and its command, which then failed. Neither offers it now, and
// approve says why it cannot load and how to drop it.
func TestAnIDChangeThatCannotLoadIsNotOfferedForApproval(t *testing.T) {
	state, m, m2 := t.TempDir(), t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, m, "com.acme.x", "1.0.0", "a.acme.example"))
	erpFolder(t, m, "com.acme.y", "1.0.0", "a.acme.example")
	if o := loadAsServe(t, state, m); o.Result != policy.Pending {
		t.Fatalf("the id change: %+v", o)
	}
	loadAsServe(t, state, erpFolder(t, m2, "com.acme.y", "1.0.0", "b.acme.example"))
	out, _, _ := runCLI(t, "state", "--state", state, "list")
	if !strings.Contains(out, "cannot load, so it is not approvable") || strings.Contains(out, "still waits for approval") {
		t.Fatalf("state list:\n%s", out)
	}
	out, errs, code := runCLI(t, "approve", "--yes", "--state", state, "com.acme.y", "1.0.0")
	if code != exitFail || !strings.Contains(errs, "cannot load, so it is not approvable") || !strings.Contains(errs, "forget --folder "+m) || strings.Contains(out+errs, "--digest") {
		t.Fatalf("approve com.acme.y 1.0.0: exit %d\n%s%s", code, out, errs)
	}
}
