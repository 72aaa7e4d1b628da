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

// TestNewIntegrationOnARecycledListenerIsNotThePreviousOccupant is issue
// 17's fifth attacker, finding 2: day 1 the victim is served on socket A;
// day 2 the operator moves it to socket B and gives A to a new
// integration from its own folder. The newcomer is its own first load:
// its own id, its own list, never the victim's, and the victim's id is
// served once, on B.
func TestNewIntegrationOnARecycledListenerIsNotThePreviousOccupant(t *testing.T) {
	dir, socks := t.TempDir(), t.TempDir()
	sockA, sockB := filepath.Join(socks, "a.sock"), filepath.Join(socks, "b.sock")
	for n, host := range map[string]string{"victim": "v.victim.example", "hostile": "good.hostile.example"} {
		os.MkdirAll(filepath.Join(dir, n), 0o755)
		os.WriteFile(filepath.Join(dir, n, "manifest.json"), []byte(`{"manifest_version":1,"id":"com.a17.`+n+`","version":"1.0.0","network":{"connect":["`+host+`"]}}`), 0o600)
	}
	cfg, auditFile := filepath.Join(dir, "egressd.yaml"), filepath.Join(dir, "audit.log")
	base := "state_dir: " + filepath.Join(dir, "state") + "\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: " + auditFile + "}\nintegrations:\n"
	day := func(doc, want string) (*lockedBuffer, chan os.Signal, chan int) {
		os.WriteFile(cfg, []byte(base+doc), 0o600)
		var stdout, stderr lockedBuffer
		sig, done := make(chan os.Signal, 1), make(chan int, 1)
		go func() { done <- serve(context.Background(), []string{"--config", cfg}, &stdout, &stderr, sig) }()
		waitFor(t, &stderr, want)
		return &stderr, sig, done
	}
	stop := func(stderr *lockedBuffer, sig chan os.Signal, done chan int) {
		sig <- syscall.SIGTERM
		if code := <-done; code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	}

	stderr, sig, done := day("  - manifest: victim\n    listen: unix:"+sockA+"\n", `serving com.a17.victim on unix:`)
	if r := unixConnectReason(t, sockA, "v.victim.example"); r != "dns_error" {
		t.Fatalf("day 1, the victim: %s", r)
	}
	stop(stderr, sig, done)

	stderr, sig, done = day("  - manifest: victim\n    listen: unix:"+sockB+"\n  - manifest: hostile\n    listen: unix:"+sockA+"\n",
		`serving com.a17.\w+ on unix:\S+\n[^\n]*serving com.a17.\w+ on unix:`)
	if !strings.Contains(stderr.String(), "serving com.a17.hostile on unix:"+sockA) || strings.Count(stderr.String(), "serving com.a17.victim") != 1 {
		t.Fatalf("day 2: the recycled listener does not serve the newcomer as itself:\n%s", stderr.String())
	}
	if r := unixConnectReason(t, sockA, "v.victim.example"); r != "not_allowlisted" {
		t.Fatalf("day 2: the victim's host through the newcomer's listener: %s\n%s", r, stderr.String())
	}
	if r := unixConnectReason(t, sockA, "good.hostile.example"); r != "dns_error" {
		t.Fatalf("day 2: the newcomer's own host: %s", r)
	}
	if r := unixConnectReason(t, sockB, "v.victim.example"); r != "dns_error" {
		t.Fatalf("day 2: the victim on its new listener: %s", r)
	}
	stop(stderr, sig, done)
	log, _ := os.ReadFile(auditFile)
	if regexp.MustCompile(`"integration":"com.a17.victim"[^\n]*"host":"good.hostile.example"|"integration":"com.a17.victim"[^\n]*"pending":"com.a17.hostile`).Match(log) {
		t.Fatalf("the newcomer was audited as the victim:\n%s", log)
	}
}
