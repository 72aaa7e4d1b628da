package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// TestSuggestLeavesOutWhatAnUnapprovedClaimOfTheIDTried is round 27's f2:
// one serve log holding the id's owner folder and another folder's
// unapproved claim of the same id. audit report filed the claimant's
// attempts apart, but audit suggest (with or without --integration)
// offered the claimant's hosts as the owner's permission, so an operator
// pasting it would widen the victim id with the attacker's exfil hosts.
// serve's stderr also said "serving ID" for the claimant with no word of
// the claim. Now suggest leaves claim events out and serve says the
// listener serves a claim that waits for approval, nothing allowed.
func TestSuggestLeavesOutWhatAnUnapprovedClaimOfTheIDTried(t *testing.T) {
	dir := t.TempDir()
	for folder, doc := range map[string]string{
		"owner":    `{"manifest_version":1,"id":"com.test.victim","version":"1.0.0","network":{"connect":["api.victim.example"]}}`,
		"claimant": `{"manifest_version":1,"id":"com.test.victim","version":"2.0.0","network":{"connect":["api.victim.example","exfil.evil.example"]}}`,
	} {
		os.MkdirAll(filepath.Join(dir, folder), 0o755)
		writeFile(t, filepath.Join(dir, folder, "manifest.json"), doc)
	}
	state, sockets := filepath.Join(dir, "state"), t.TempDir()
	sock := func(n string) string { return filepath.Join(sockets, n+".sock") }
	serveWith := func(name string, folders []string, during func(stderr *lockedBuffer)) string {
		cfg, logPath := filepath.Join(dir, name+".yaml"), filepath.Join(dir, name+".log")
		text := "state_dir: " + state + "\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: " + logPath + ", checkpoints: none}\nintegrations:\n"
		for _, f := range folders {
			text += "  - manifest: " + filepath.Join(dir, f) + "\n    listen: unix:" + sock(f) + "\n"
		}
		writeFile(t, cfg, text)
		var stdout, stderr lockedBuffer
		sig := make(chan os.Signal, 1)
		done := make(chan int, 1)
		go func() { done <- serve(context.Background(), []string{"--config", cfg}, &stdout, &stderr, sig) }()
		for _, f := range folders {
			waitFor(t, &stderr, `on unix:`+regexp.QuoteMeta(sock(f)))
		}
		during(&stderr)
		sig <- syscall.SIGTERM
		if code := <-done; code != exitOK {
			t.Fatalf("serve exit %d:\n%s", code, stderr.String())
		}
		return logPath
	}
	serveWith("first", []string{"owner"}, func(*lockedBuffer) {}) // binds the id to the owner's folder
	logPath := serveWith("both", []string{"owner", "claimant"}, func(stderr *lockedBuffer) {
		for _, h := range []string{"exfil.evil.example", "stolen-data.evil.example"} {
			if r := unixConnectReason(t, sock("claimant"), h); r != "pending_approval" && r != "not_allowlisted" {
				t.Errorf("the claimant's CONNECT %s: %s", h, r)
			}
		}
		if r := unixConnectReason(t, sock("owner"), "api.victim.example"); r != "dns_error" {
			t.Errorf("the owner's CONNECT: %s", r)
		}
		line := regexp.MustCompile(`(?m)^.*on unix:` + regexp.QuoteMeta(sock("claimant")) + `.*$`).FindString(stderr.String())
		if !strings.Contains(line, "claim") || !strings.Contains(line, "waits for approval") || !strings.Contains(line, filepath.Join(dir, "claimant")) {
			t.Errorf("serve's line for the claimant's listener says nothing of the claim: %q", line)
		}
	})
	report, _, _ := runCLI(t, "audit", "report", logPath)
	if !strings.Contains(report, "unapproved claim of com.test.victim from "+filepath.Join(dir, "claimant")) || !strings.Contains(report, "exfil.evil.example") {
		t.Fatalf("the report does not file the claim's attempts apart, so this test proves nothing:\n%s", report)
	}
	for _, args := range [][]string{{"audit", "suggest", logPath}, {"audit", "suggest", "--integration", "com.test.victim", logPath}} {
		out, errs, code := runCLI(t, args...)
		if code != exitOK || !strings.Contains(out, `"api.victim.example"`) || strings.Contains(out, "evil.example") {
			t.Errorf("egressd %s: exit %d, want the owner's host alone:\n%s%s", strings.Join(args, " "), code, out, errs)
		}
	}
}
