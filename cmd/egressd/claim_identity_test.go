package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// everyEventIsTheClaims fails unless every event of log written for an
// integration carries claim, the folder claiming the id, and the text
// report opens no section for the id's owner.
func everyEventIsTheClaims(t *testing.T, logPath, claim, id string, wantActions ...string) {
	t.Helper()
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatal(err)
		}
		if ev["integration"] == nil {
			continue
		}
		if ev["claim"] != claim {
			t.Errorf("an event of the claim is written as the owner's: %s", l)
		}
		if a, ok := ev["action"].(string); ok {
			seen[a] = true
		}
	}
	for _, a := range wantActions {
		if !seen[a] {
			t.Errorf("no %s event of the claim in the log:\n%s", a, data)
		}
	}
	out, errs, _ := runCLI(t, "audit", "report", logPath)
	if regexp.MustCompile(`(?m)^== `+regexp.QuoteMeta(id)+` \(`).MatchString(out) || !strings.Contains(out, "== unapproved claim of "+id+" from "+claim) {
		t.Errorf("the report files the claim's events under the owner:\n%s%s", out, errs)
	}
}

// TestRunOfAFolderClaimingAnApprovedIDWritesEveryEventAsTheClaim is issue
// 18's fifth attacker, finding 2, under egressd run: a second folder whose
// manifest claims an approved id at 9.0.0 had its connect, dns and policy
// events marked claim, but its lifecycle events (env, start, limits, stop)
// were written as the owner's, with 9.0.0, so the report opened the
// owner's section at a version the owner never had; and the log file was
// named ID.PID.log, as the owner's runs are. Every event of the claim is
// the claim's now, and the log file's name says it is a claim.
func TestRunOfAFolderClaimingAnApprovedIDWritesEveryEventAsTheClaim(t *testing.T) {
	a := newSandboxEnv(t)
	a.writeSandboxed("com.test.sandboxed", "1.0.0", "api.allowed.example")
	a.runFresh(`true`)
	b := a.secondFolder("com.test.sandboxed", "9.0.0")
	cmd := exec.Command(egressdBinary(t), "run", "--state", b.state, "--resolver", b.dns.Addr, b.dir, "--", "/bin/sh", "-c", "echo claimant ran")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "claimant ran") {
		t.Fatalf("%v\n%s", err, out)
	}
	m := regexp.MustCompile(`egressd run: audit log (\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no audit log named:\n%s", out)
	}
	logPath := string(m[1])
	t.Cleanup(func() { os.Remove(logPath) })
	if base := filepath.Base(logPath); !strings.HasPrefix(base, "com.test.sandboxed@claim.") {
		t.Errorf("the claim's log is named as the owner's: %s", base)
	}
	everyEventIsTheClaims(t, logPath, b.dir, "com.test.sandboxed", "pending", "env", "start", "limits", "stop")
}

// TestServeOfAFolderClaimingAnApprovedIDWritesItsListeningEventAsTheClaim
// is the same finding under serve: the claim's listening event (and its
// exemption announcement, and the record of a reload that kept it) was
// the owner's, with the claim's version.
func TestServeOfAFolderClaimingAnApprovedIDWritesItsListeningEventAsTheClaim(t *testing.T) {
	dir := t.TempDir()
	for folder, doc := range map[string]string{
		"victim": `{"manifest_version":1,"id":"com.test.victim","version":"1.0.0","network":{"connect":["api.victim.example"]}}`,
		"evil":   `{"manifest_version":1,"id":"com.test.victim","version":"9.0.0","network":{"connect":["evil.example"]}}`,
	} {
		os.MkdirAll(filepath.Join(dir, folder), 0o755)
		writeFile(t, filepath.Join(dir, folder, "manifest.json"), doc)
	}
	state, sockets := filepath.Join(dir, "state"), t.TempDir()
	sock := filepath.Join(sockets, "evil.sock")
	serveOnce := func(folder, exemptions string, during func(logPath string, sig chan<- os.Signal)) string {
		cfg, logPath, sock := filepath.Join(dir, folder+".yaml"), filepath.Join(dir, folder+".log"), filepath.Join(sockets, folder+".sock")
		writeFile(t, cfg, "state_dir: "+state+"\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: "+logPath+", checkpoints: none}\nintegrations:\n  - manifest: "+folder+"\n    listen: unix:"+sock+"\n"+exemptions)
		var stdout, stderr lockedBuffer
		sig := make(chan os.Signal, 1)
		done := make(chan int, 1)
		go func() { done <- serve(context.Background(), []string{"--config", cfg}, &stdout, &stderr, sig) }()
		waitFor(t, &stderr, `serving com.test.victim on unix:`)
		during(logPath, sig)
		sig <- syscall.SIGTERM
		<-done
		return logPath
	}
	serveOnce("victim", "", func(string, chan<- os.Signal) {}) // binds the id to the victim's folder (on its own listener: a listener is bound too)
	logPath := serveOnce("evil", "    allow_ports: [8443]\n", func(logPath string, sig chan<- os.Signal) {
		if r := unixConnectReason(t, sock, "evil.example"); r != "pending_approval" && r != "not_allowlisted" {
			t.Errorf("the claim's CONNECT: %s", r)
		}
		// A reload the claim's broken manifest fails keeps the claim in force.
		writeFile(t, filepath.Join(dir, "evil", "manifest.json"), `{"manifest_version":1,"id":"com.test.victim"`)
		sig <- syscall.SIGHUP
		waitFor(t, &lockedFile{path: logPath}, `"action":"kept_last_good"`)
	})
	everyEventIsTheClaims(t, logPath, filepath.Join(dir, "evil"), "com.test.victim", "pending", "listening", "exemption", "kept_last_good")
}
