package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestServeRestartAfterOneIntegrationTookAnothersIDServesTheOthers is
// issue 13's b3: C rewrites its manifest's id to B's. The reload keeps C's
// last good policy, but the next start refused the whole config ("ids must
// be unique"), so one integration's author could take every integration
// down. Version memory binds the id to B's folder: B keeps it, and C is a
// pending claim with nothing allowed, stated in one warning line.
func TestServeRestartAfterOneIntegrationTookAnothersIDServesTheOthers(t *testing.T) {
	dir := t.TempDir()
	write := func(folder, id, version, hosts string) {
		os.MkdirAll(filepath.Join(dir, folder), 0o755)
		erpFolder(t, filepath.Join(dir, folder), id, version, strings.Split(hosts, ",")...)
	}
	write("b", "com.test.b", "1.0.0", "b.example")
	write("c", "com.test.c", "1.0.0", "c.example")
	sockets := t.TempDir()
	sock := func(n string) string { return filepath.Join(sockets, n+".sock") }
	cfg, auditFile := filepath.Join(dir, "egressd.yaml"), filepath.Join(dir, "audit.log")
	os.WriteFile(cfg, []byte("state_dir: "+filepath.Join(dir, "state")+"\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: "+auditFile+"}\nintegrations:\n"+
		"  - manifest: b\n    listen: unix:"+sock("b")+"\n  - manifest: c\n    listen: unix:"+sock("c")+"\n"), 0o600)
	start := func() (*lockedBuffer, func() int) {
		var stdout, stderr lockedBuffer
		sig := make(chan os.Signal, 1)
		done := make(chan int, 1)
		go func() { done <- serve(context.Background(), []string{"--config", cfg}, &stdout, &stderr, sig) }()
		return &stderr, func() int {
			select {
			case code := <-done:
				return code
			default:
			}
			sig <- syscall.SIGTERM
			return <-done
		}
	}
	stderr, stop := start()
	waitFor(t, stderr, `serving com.test.c on unix:`)
	stop()

	// Above B's version: at B's own version with another list no approval
	// could ever apply it, and the load refuses it outright
	// (TestAClaimBelowTheIDsVersionIsRefusedNotHeldForAnApprovalNoLoadApplies).
	write("c", "com.test.b", "1.1.0", "b.example,c.example")
	stderr, stop = start()
	defer stop()
	waitFor(t, stderr, `serving com.test.b on unix:`)
	if got := unixConnectReason(t, sock("b"), "b.example"); got != "dns_error" { // allowed; the resolver is closed
		t.Fatalf("B after the restart: %s\n%s", got, stderr)
	}
	for _, host := range []string{"b.example", "c.example"} {
		if got := unixConnectReason(t, sock("c"), host); got != "pending_approval" {
			t.Fatalf("C asked for %s after taking B's id: %s, want pending_approval\n%s", host, got, stderr)
		}
	}
	if n := strings.Count(stderr.String(), "warning: "+filepath.Join(dir, "c")); n != 1 {
		t.Fatalf("%d warning lines for C, want 1:\n%s", n, stderr)
	}
	waitFor(t, &lockedFile{path: auditFile}, `"event":"policy".*"action":"pending"`)
}
