package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pasted runs command as an operator pasting it into a shell would, with
// the real egressd binary first on PATH, and returns its output and error.
// The operator confirms at the terminal; here --yes stands for it.
func pasted(t *testing.T, command string) (string, error) {
	t.Helper()
	// No terminal here to confirm on: each approve in it gets --yes.
	sh := exec.Command("/bin/sh", "-c", strings.ReplaceAll(command, "egressd approve ", "egressd approve --yes "))
	sh.Env = append(os.Environ(), "PATH="+filepath.Dir(egressdBinary(t))+":"+os.Getenv("PATH"))
	out, err := sh.CombinedOutput()
	return string(out), err
}

// TestTheIDChangeWarningsApproveCommandApprovesAsPrinted is f13i item 2:
// a folder's id change waits for the operator, and run's warning told
// them "egressd approve NEWID VERSION", which approves nothing for an id
// change (it shows what waits): only --folder PLACE --digest D does, and
// the run had its own --state. The warning now prints that command, with
// the state folder; pasted into a shell, it approves, and the next run
// has the new id's list.
func TestTheIDChangeWarningsApproveCommandApprovesAsPrinted(t *testing.T) {
	e := newSandboxEnv(t)
	curlEvil := `curl -sS -m 10 --cacert ca.pem ` + e.url("evil.example") + ` 2>&1; echo rc=$?`
	e.runFresh("true") // com.test.sandboxed 1.0.0: the folder's first id
	e.writeSandboxed("com.test.sandboxed2", "1.0.0", "api.allowed.example", "evil.example")
	out, errs, _ := e.runFresh(curlEvil)
	warning := regexp.MustCompile(`changed its id from com\.test\.sandboxed to com\.test\.sandboxed2 1\.0\.0 [^\n]*?\((egressd approve [^)\n]*)\)`).FindStringSubmatch(errs)
	if !strings.Contains(out, "rc=56") || warning == nil {
		t.Fatalf("the id change does not wait with a command:\nstdout:\n%s\nstderr:\n%s", out, errs)
	}
	if msg, err := pasted(t, warning[1]); err != nil || !strings.Contains(msg, "approved com.test.sandboxed2 1.0.0") {
		t.Fatalf("the warning's command %q: %v\n%s", warning[1], err, msg)
	}
	out, errs, _ = e.runFresh(curlEvil)
	if !strings.Contains(out, "hello from evil.example") || strings.Contains(errs, "approval") {
		t.Fatalf("the approved id change is not in force:\nstdout:\n%s\nstderr:\n%s", out, errs)
	}
}

// TestStateListCallsAClaimOfAnUnboundIDAClaim: a folder version memory
// never bound to an id claims one that memory from an earlier egressd
// binds to no folder. state list said the folder "changes its id to" it,
// although the folder had no id to change; it says what it is, a claim,
// and the command it prints approves it as printed.
func TestStateListCallsAClaimOfAnUnboundIDAClaim(t *testing.T) {
	state, owner, other := t.TempDir(), t.TempDir(), t.TempDir()
	erpFolder(t, owner, "com.acme.erp", "1.0.0", "api.acme.example")
	if _, errs, code := runCLI(t, "approve", "--yes", "--state", state, "--new-id", "--manifest", owner); code != exitOK {
		t.Fatalf("approve --new-id: %d %s", code, errs)
	}
	toFirstLayout(t, state) // an earlier egressd's memory: the id, bound to no folder
	loadAsServe(t, state, erpFolder(t, other, "com.acme.erp", "1.0.0", "api.acme.example"))
	list := stateList(t, state)
	line := regexp.MustCompile(`(?m)^folder ` + regexp.QuoteMeta(other) + ` claims com\.acme\.erp 1\.0\.0, which version memory binds to no folder; pending, digest \S+: (egressd approve .*)$`).FindStringSubmatch(list)
	if line == nil || strings.Contains(list, "changes its id") {
		t.Fatalf("state list does not call the claim a claim:\n%s", list)
	}
	if msg, err := pasted(t, strings.Replace(line[1], "egressd approve ", "egressd approve --state "+state+" ", 1)); err != nil || !strings.Contains(msg, "approved com.acme.erp 1.0.0") {
		t.Fatalf("state list's command %q: %v\n%s", line[1], err, msg)
	}
}

// TestTheClaimNoticesWayOutForAGoneFolderWorksAsPrinted: folder c claims
// the id of folder m, which is gone. The claim notice said "if folder m
// is gone, egressd state … forget ID makes the next load a first load",
// and that command, pasted, was refused because of the very claim the
// notice is about (round 25 trust-chain attacker, LOW). The way out it
// prints now works as printed: pasted, c's next run is a first load of
// the id, bound to c.
func TestTheClaimNoticesWayOutForAGoneFolderWorksAsPrinted(t *testing.T) {
	requireSandbox(t)
	bin := egressdBinary(t)
	base, state := t.TempDir(), t.TempDir()
	m, c := filepath.Join(base, "m"), filepath.Join(base, "c")
	for _, dir := range []string{m, c} {
		os.Mkdir(dir, 0o755)
		doc := `{"schemaVersion":1,"id":"com.test.claimed","version":"1.0.0","runtime":{"kind":"local-mcp","command":"sh","args":["x"]},"permissions":[{"kind":"network","domains":["a.example"]}]}`
		if err := os.WriteFile(filepath.Join(dir, "voiceos.integration.json"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(dir string) string {
		out, err := exec.Command(bin, "run", "--state", state, "--resolver", "127.0.0.1:9", dir, "--", "/bin/true").CombinedOutput()
		if err != nil {
			t.Fatalf("run %s: %v\n%s", dir, err, out)
		}
		return string(out)
	}
	run(m)
	if err := os.RemoveAll(m); err != nil {
		t.Fatal(err)
	}
	notice := run(c)
	wayOut := regexp.MustCompile(`if folder ` + regexp.QuoteMeta(m) + ` is gone, (egressd state .*?) (?:drops|makes)`).FindStringSubmatch(notice)
	if wayOut == nil {
		t.Fatalf("the claim notice names no way out for a gone folder:\n%s", notice)
	}
	if msg, err := pasted(t, wayOut[1]); err != nil {
		t.Fatalf("the claim notice's way out %q, pasted: %v\n%s", wayOut[1], err, msg)
	}
	if again := run(c); strings.Contains(again, "claims the id") {
		t.Fatalf("after the way out, c still claims the id:\n%s", again)
	}
	if list := stateList(t, state); !strings.Contains(list, "com.test.claimed 1.0.0 in force (1 entries); bound to folder "+c) {
		t.Fatalf("c's next load was not a first load of the id:\n%s", list)
	}
}
