package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// writeManifestFile writes a sandboxed integration's manifest, id at
// 1.0.0 allowing domain, to the file name in e.dir (not a standard name).
func (e *sandboxEnv) writeManifestFile(name, id, domain string) string {
	e.t.Helper()
	doc := `{"schemaVersion":1,"id":"` + id + `","version":"1.0.0",
	"runtime":{"kind":"local-mcp","command":"sh","args":["-c","echo runtime ran"]},
	"permissions":[{"kind":"network","domains":["` + domain + `"]}]}`
	file := filepath.Join(e.dir, name)
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return file
}

// runManifestFile runs "egressd run --manifest file" with the default
// audit log (STATE/audit/ID.PID.log), so the log's name is tested too.
func (e *sandboxEnv) runManifestFile(file, script string) (string, string, int) {
	e.t.Helper()
	cmd := exec.Command(egressdBinary(e.t), "run", "--state", e.state, "--resolver", e.dns.Addr,
		"--allow-private", "127.0.0.2/32", "--allow-port", e.port, "--manifest", file, "--", "/bin/sh", "-c", script)
	cmd.Dir = e.dir
	return runCmd(e.t, cmd)
}

// mixesIdentities reports whether egressd's messages take one manifest
// for another's rename or claim.
func mixesIdentities(msgs string) bool {
	for _, s := range []string{"changed its id", "claims", "pending", "approve"} {
		if strings.Contains(msgs, s) {
			return true
		}
	}
	return false
}

// TestRunTwoManifestFilesInOneFolderAreTwoIntegrations is round 6's b2:
// two integrations whose manifests are files of one folder (m/a.json,
// m/b.json) shared one identity, the folder's. B ran with A's approved
// list and A's sandbox state, its run log was named after A, and it was
// told it had "changed its id" from A. A manifest file with a name of its
// own is its own place in version memory: each keeps its id, list, state
// and log, and neither is a rename of the other.
func TestRunTwoManifestFilesInOneFolderAreTwoIntegrations(t *testing.T) {
	e := newSandboxEnv(t)
	os.Remove(filepath.Join(e.dir, "voiceos.integration.json"))
	a := e.writeManifestFile("a.json", "com.test.a", "api.allowed.example")
	b := e.writeManifestFile("b.json", "com.test.b", "evil.example")
	curl := func(host string) string {
		return `if curl -sS -m 10 --cacert ca.pem ` + e.url(host) + ` >/dev/null 2>&1; then echo ` + host + ` allowed; else echo ` + host + ` refused; fi; `
	}
	probe := curl("api.allowed.example") + curl("evil.example") + `cat /var/lib/integration/who 2>/dev/null || echo no state; `

	for round := range 2 { // two processes each: nothing is a first load the second time
		out, errs, code := e.runManifestFile(a, probe+`echo a > /var/lib/integration/who`)
		wantState := "no state"
		if round == 1 {
			wantState = "a"
		}
		if code != 0 || out != "api.allowed.example allowed\nevil.example refused\n"+wantState+"\n" || mixesIdentities(errs) {
			t.Fatalf("A, round %d: exit %d\nstdout:\n%s\nstderr:\n%s", round, code, out, errs)
		}
		out, errs, code = e.runManifestFile(b, probe+`echo b > /var/lib/integration/who`)
		wantState = "no state"
		if round == 1 {
			wantState = "b"
		}
		if code != 0 || out != "api.allowed.example refused\nevil.example allowed\n"+wantState+"\n" || mixesIdentities(errs) {
			t.Fatalf("B, round %d: exit %d\nstdout:\n%s\nstderr:\n%s", round, code, out, errs)
		}
	}
	for _, id := range []string{"com.test.a", "com.test.b"} {
		if logs, _ := filepath.Glob(filepath.Join(e.state, "audit", id+".*.log")); len(logs) != 2 {
			all, _ := filepath.Glob(filepath.Join(e.state, "audit", "*"))
			t.Fatalf("%d run logs named after %s, want 2: %v", len(logs), id, all)
		}
	}
	list, err := exec.Command(egressdBinary(t), "state", "--state", e.state, "list").CombinedOutput()
	if err != nil || !strings.Contains(string(list), "com.test.a 1.0.0 in force (1 entries); bound to folder "+a) ||
		!strings.Contains(string(list), "com.test.b 1.0.0 in force (1 entries); bound to folder "+b) || strings.Contains(string(list), "pending") {
		t.Fatalf("state list does not bind each id to its own manifest file: %v\n%s", err, list)
	}
}

// TestServeTwoManifestFilesInOneFolderServesBothUnderTheirOwnIDs: the
// same two files in one config. serve refused to start (the second was
// read as the first's rename, "serving com.test.a" on both); each is
// served under its own id with its own list.
func TestServeTwoManifestFilesInOneFolderServesBothUnderTheirOwnIDs(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "m"), 0o755)
	for name, doc := range map[string]string{
		"a.json": `{"manifest_version":1,"id":"com.test.a","version":"1.0.0","network":{"connect":["a.example"]}}`,
		"b.json": `{"manifest_version":1,"id":"com.test.b","version":"1.0.0","network":{"connect":["b.example"]}}`,
	} {
		os.WriteFile(filepath.Join(dir, "m", name), []byte(doc), 0o644)
	}
	sockets := t.TempDir()
	sock := func(n string) string { return filepath.Join(sockets, n+".sock") }
	cfg := filepath.Join(dir, "egressd.yaml")
	os.WriteFile(cfg, []byte("state_dir: "+filepath.Join(dir, "state")+"\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: "+filepath.Join(dir, "audit.log")+"}\nintegrations:\n"+
		"  - manifest: m/a.json\n    listen: unix:"+sock("a")+"\n  - manifest: m/b.json\n    listen: unix:"+sock("b")+"\n"), 0o600)
	if out, err := exec.Command(egressdBinary(t), "check", "--config", cfg).CombinedOutput(); err != nil || mixesIdentities(string(out)) {
		t.Fatalf("check --config: %v\n%s", err, out)
	}
	for range 2 { // and after a restart
		var stdout, stderr lockedBuffer
		sig := make(chan os.Signal, 1)
		done := make(chan int, 1)
		go func() { done <- serve(context.Background(), []string{"--config", cfg}, &stdout, &stderr, sig) }()
		waitFor(t, &stderr, `serving com.test.a on unix:`+sock("a"))
		waitFor(t, &stderr, `serving com.test.b on unix:`+sock("b"))
		for _, c := range []struct{ sock, host, want string }{
			{sock("a"), "a.example", "dns_error"}, // allowed; the resolver is closed
			{sock("a"), "b.example", "not_allowlisted"},
			{sock("b"), "b.example", "dns_error"},
			{sock("b"), "a.example", "not_allowlisted"},
		} {
			if got := unixConnectReason(t, c.sock, c.host); got != c.want {
				t.Errorf("%s asked for %s: %s, want %s\n%s", filepath.Base(c.sock), c.host, got, c.want, &stderr)
			}
		}
		if mixesIdentities(stderr.String()) {
			t.Errorf("serve warned:\n%s", &stderr)
		}
		sig <- syscall.SIGTERM
		if code := <-done; code != 0 {
			t.Fatalf("serve exited %d\n%s", code, &stderr)
		}
	}
}
