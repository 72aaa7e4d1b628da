package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// writeSandboxed rewrites the sandbox env's manifest with id, version and
// network domains.
func (e *sandboxEnv) writeSandboxed(id, version string, domains ...string) {
	e.t.Helper()
	doc := `{"schemaVersion":1,"id":"` + id + `","version":"` + version + `",
	"runtime":{"kind":"local-mcp","command":"sh","args":["-c","echo runtime ran"]},
	"permissions":[{"kind":"network","domains":["` + strings.Join(domains, `","`) + `"]}]}`
	if err := os.WriteFile(filepath.Join(e.dir, "voiceos.integration.json"), []byte(doc), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// stateFolder is the folder where egressd run keeps id's state for the
// manifest in e.dir (stateName).
func (e *sandboxEnv) stateFolder(id string) string {
	return filepath.Join(e.state, "sandbox", stateName(id, filepath.Join(e.dir, "voiceos.integration.json")))
}

// bindID binds e's manifest id to e.dir in version memory without running
// it, as egressd approve --new-id does.
func (e *sandboxEnv) bindID() {
	e.t.Helper()
	out, err := exec.Command(egressdBinary(e.t), "approve", "--yes", "--state", e.state, "--new-id", "--manifest", e.dir).CombinedOutput()
	if err != nil {
		e.t.Fatalf("approve --new-id: %v\n%s", err, out)
	}
}

// runFresh is one "egressd run" process with a fresh audit log: what it
// printed, and what it logged.
func (e *sandboxEnv) runFresh(script string) (stdout, stderr, log string) {
	e.t.Helper()
	os.Remove(e.audit)
	out, errs, code := e.run(script)
	if code != 0 {
		e.t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	return out, errs, e.auditLog()
}

// TestRunIDChangeAfterARestartIsNotAFreshStart is issue 13.1 across
// processes, with issue 12.5 on the way: a widening waits and run says so,
// and the same folder with its id changed is still the same folder, in
// every new egressd process, until the operator approves the new id.
func TestRunIDChangeAfterARestartIsNotAFreshStart(t *testing.T) {
	e := newSandboxEnv(t)
	curlEvil := `curl -sS -m 10 --cacert ca.pem ` + e.url("evil.example") + ` 2>&1; echo rc=$?`
	e.runFresh("true") // 1.0.0, api.allowed.example only: the first list

	e.writeSandboxed("com.test.sandboxed", "1.1.0", "api.allowed.example", "evil.example")
	out, errs, log := e.runFresh(curlEvil)
	if !strings.Contains(out, "rc=56") || !strings.Contains(errs, "com.test.sandboxed 1.1.0 adds evil.example to its network list (list digest "+digestOf(t, e.dir)+"); it waits for the operator's approval (egressd approve --state "+e.state+" --digest "+digestOf(t, e.dir)+" com.test.sandboxed 1.1.0)") {
		t.Fatalf("widening:\nstdout:\n%s\nstderr:\n%s", out, errs)
	}
	// The policy event names the version in force, with the one that
	// waits in pending (round 40).
	if !strings.Contains(log, `"event":"policy","integration":"com.test.sandboxed","integration_version":"1.0.0"`) || !strings.Contains(log, `"action":"pending","pending":"1.1.0"`) ||
		!strings.Contains(log, `"decision":"deny","reason":"pending_approval","host":"evil.example"`) {
		t.Fatalf("audit log:\n%s", log)
	}

	e.writeSandboxed("com.test.sandboxed2", "1.0.0", "api.allowed.example", "evil.example")
	for range 2 { // two new processes: neither is a fresh start
		out, errs, log = e.runFresh(curlEvil)
		if !strings.Contains(out, "rc=56") || !strings.Contains(errs, "changed its id from com.test.sandboxed to com.test.sandboxed2 1.0.0") ||
			!strings.Contains(errs, "egressd approve --state "+e.state+" --folder "+e.dir+" --digest "+digestOf(t, e.dir)+" com.test.sandboxed2 1.0.0") || !strings.Contains(log, `"reason":"pending_approval","host":"evil.example"`) {
			t.Fatalf("id change:\nstdout:\n%s\nstderr:\n%s\n%s", out, errs, log)
		}
	}

	list, err := exec.Command(egressdBinary(t), "state", "--state", e.state, "list").CombinedOutput()
	if err != nil || !regexp.MustCompile(`folder \S+ \(was com.test.sandboxed\) changes its id to com.test.sandboxed2 1.0.0; pending, digest `+digestOf(t, e.dir)+`: egressd approve --state \S+ --folder \S+ --digest `+digestOf(t, e.dir)+` com.test.sandboxed2 1.0.0\n`).Match(list) {
		t.Fatalf("state list: %v\n%s", err, list)
	}
	approve := exec.Command(egressdBinary(t), "approve", "--yes", "--state", e.state, "--folder", e.dir, "--digest", digestOf(t, e.dir), "com.test.sandboxed2", "1.0.0")
	if msg, err := approve.CombinedOutput(); err != nil || !strings.Contains(string(msg), "the id change of") {
		t.Fatalf("approve: %v %s", err, msg)
	}
	out, errs, _ = e.runFresh(curlEvil)
	if !strings.Contains(out, "hello from evil.example") || strings.Contains(errs, "approval") {
		t.Fatalf("approved id change:\nstdout:\n%s\nstderr:\n%s", out, errs)
	}
}
