package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// a18Prefix is the attacker's: 258 bytes, beyond the audit field cap of
// 256, so ids that differ only after it were logged as one integration.
var a18Prefix = "com.a18." + strings.Repeat("x", 250)

func a18Manifest(t *testing.T, dir, id, host string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "voiceos.integration.json"), `{"schemaVersion":1,"id":"`+id+`","name":"n","version":"1.0.0","runtime":{"kind":"local-mcp","command":"node"},"permissions":[{"kind":"network","domains":["`+host+`"]}]}`)
}

// The attacker's two manifests were "ok" to check and served as two
// integrations the log could not tell apart; check now refuses both.
func TestCheckRefusesTwoIDsTheAuditLogWouldHaveMerged(t *testing.T) {
	dir := t.TempDir()
	a18Manifest(t, filepath.Join(dir, "A"), a18Prefix+".benign", "api.benign.example")
	a18Manifest(t, filepath.Join(dir, "B"), a18Prefix+".hostile", "api.hostile.example")
	out, _, code := runCLI(t, "check", filepath.Join(dir, "A"), filepath.Join(dir, "B"))
	if code == exitOK || !strings.Contains(out, "id: 265 bytes; an id is at most 128 bytes") || !strings.Contains(out, "id: 266 bytes; an id is at most 128 bytes") {
		t.Fatalf("check: exit %d\n%s", code, out)
	}
}

// serve refuses the over-long id at start (its listener refuses every
// connection, the others serve), and a reload to one keeps the last good.
func TestServeRefusesAnIntegrationWhoseIDTheAuditLogCannotHold(t *testing.T) {
	f := newTwoIntegrations(t)
	long := a18Prefix + ".hostile"
	erpFolder(t, f.hostile, long, "1.0.0", "h.example")
	if out, _, code := runCLI(t, "check", "--config", f.cfg); code == exitOK || !strings.Contains(out, "id: 266 bytes; an id is at most 128 bytes") {
		t.Fatalf("check --config passed an over-long id: exit %d\n%s", code, out)
	}
	sv := serveInProcess(t, f.cfg)
	startsRefusingOnlyTheHostile(t, f, sv, "id: 266 bytes; an id is at most 128 bytes")

	erpFolder(t, f.victim, long+"2", "1.0.1", "v.example")
	sv.sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: f.audit}, `"integration":"com.test.victim"[^\n]*"action":"kept_last_good"[^\n]*`+regexp.QuoteMeta("id: 267 bytes; an id is at most 128 bytes"))
	if got := unixConnectReason(t, f.victimSock, "v.example"); got != "dns_error" { // allowed; the resolver is closed
		t.Fatalf("after a reload to an over-long id: %s, want the last good list (dns_error)\n%s", got, sv.stderr.String())
	}
	sv.stop(t)
	if log, _ := os.ReadFile(f.audit); strings.Contains(string(log), a18Prefix) {
		t.Fatalf("the over-long id reached the audit log:\n%s", log)
	}
}
