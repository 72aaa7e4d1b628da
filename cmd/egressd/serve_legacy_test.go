package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestServeLegacyIDWaitsForTheOperatorToNameItsFolder: version memory from
// an egressd before folder binding (records by id alone) binds the id to no
// folder and no listener. serve's load of it waits, with nothing allowed,
// until "egressd approve --manifest FOLDER" and a reload; then it serves
// its list.
func TestServeLegacyIDWaitsForTheOperatorToNameItsFolder(t *testing.T) {
	dir := t.TempDir()
	folder := filepath.Join(dir, "one")
	os.MkdirAll(folder, 0o755)
	os.WriteFile(filepath.Join(folder, "manifest.json"), []byte(`{"manifest_version":1,"id":"com.test.one","version":"1.0.0","network":{"connect":["api.one.example"]}}`), 0o600)
	sock, state := filepath.Join(t.TempDir(), "one.sock"), filepath.Join(dir, "state")
	cfg, auditFile := filepath.Join(dir, "egressd.yaml"), filepath.Join(dir, "audit.log")
	os.WriteFile(cfg, []byte("state_dir: "+state+"\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: "+auditFile+"}\nintegrations:\n"+
		"  - manifest: one\n    listen: unix:"+sock+"\n"), 0o600)
	var discard lockedBuffer
	if code := runApprove([]string{"--yes", "--state", state, "--new-id", "--manifest", folder}, &discard, &discard); code != 0 {
		t.Fatalf("approve --new-id: %d %s", code, discard.String())
	}
	toFirstLayout(t, state)

	var stdout, stderr lockedBuffer
	sig := make(chan os.Signal, 1)
	done := make(chan int, 1)
	go func() { done <- serve(context.Background(), []string{"--config", cfg}, &stdout, &stderr, sig) }()
	defer func() { sig <- syscall.SIGTERM; <-done }()
	waitFor(t, &stderr, `version memory binds com.test.one to no folder.*egressd approve --state `+state+` --manifest `+folder)
	waitFor(t, &stderr, `serving com\.test\.one on unix:`) // the notice comes at load, before the listener opens (a CI run dialled in between)
	reason := func() string {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "CONNECT api.one.example:443 HTTP/1.1\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Get("X-Egress-Reason")
	}
	if got := reason(); got != "pending_approval" {
		t.Fatalf("before the approval: %s, want pending_approval", got)
	}
	if code := runApprove([]string{"--yes", "--state", state, "--manifest", folder}, &discard, &discard); code != 0 {
		t.Fatalf("approve --manifest: %d %s", code, discard.String())
	}
	sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: auditFile}, `"action":"loaded"`)
	if got := reason(); got != "dns_error" { // allowed: it fails later, at the test's dead resolver
		t.Fatalf("after the approval: %s, want dns_error", got)
	}
}
