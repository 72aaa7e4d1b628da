package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/egressd/egressd/policy"
)

// TestServeReloadThatGivesOneIntegrationAnothersIDKeepsItsLastGoodPolicy
// is the serve side of issue 12's id claim: two integrations on two
// listeners, and a reload after one manifest took the other's id (at a
// higher version, with a wider list). The reload refuses it, keeps its
// last good policy, leaves the other integration as it was, and raises
// no version floor.
func TestServeReloadThatGivesOneIntegrationAnothersIDKeepsItsLastGoodPolicy(t *testing.T) {
	dir := t.TempDir()
	writeManifest := func(folder, id, version, hosts string) {
		os.MkdirAll(filepath.Join(dir, folder), 0o755)
		os.WriteFile(filepath.Join(dir, folder, "manifest.json"), []byte(`{"manifest_version":1,"id":"`+id+`","version":"`+version+`","network":{"connect":[`+hosts+`]}}`), 0o600)
	}
	writeManifest("one", "com.test.one", "1.0.0", `"api.one.example"`)
	writeManifest("two", "com.test.two", "1.0.0", `"api.two.example"`)
	sockets := t.TempDir()
	sock := func(n string) string { return filepath.Join(sockets, n+".sock") }
	cfg, auditFile, state := filepath.Join(dir, "egressd.yaml"), filepath.Join(dir, "audit.log"), filepath.Join(dir, "state")
	os.WriteFile(cfg, []byte("state_dir: "+state+"\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: "+auditFile+"}\nintegrations:\n"+
		"  - manifest: one\n    listen: unix:"+sock("one")+"\n  - manifest: two\n    listen: unix:"+sock("two")+"\n"), 0o600)
	var stdout, stderr lockedBuffer
	sig := make(chan os.Signal, 1)
	done := make(chan int, 1)
	go func() { done <- serve(context.Background(), []string{"--config", cfg}, &stdout, &stderr, sig) }()
	defer func() { sig <- syscall.SIGTERM; <-done }()
	waitFor(t, &stderr, `serving com.test.two on unix:`)
	waitFor(t, &stderr, `serving com.test.one on unix:`)
	reason := func(listener, host string) string { return unixConnectReason(t, sock(listener), host) }
	want := map[[2]string]string{ // allowed hosts fail later, at DNS
		{"one", "api.one.example"}: "dns_error", {"two", "api.two.example"}: "dns_error",
		{"two", "api.one.example"}: "not_allowlisted", {"two", "evil.example"}: "not_allowlisted",
	}
	for k, r := range want {
		if got := reason(k[0], k[1]); got != r {
			t.Fatalf("before the reload, %s on %s: %s, want %s", k[1], k[0], got, r)
		}
	}

	writeManifest("two", "com.test.one", "9.0.0", `"api.one.example","evil.example"`)
	sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: auditFile}, `"action":"kept_last_good".*"error":"id com.test.one is already served from [^"]*/one; ids must be unique"`)
	for k, r := range want {
		if got := reason(k[0], k[1]); got != r {
			t.Fatalf("after the refused reload, %s on %s: %s, want %s", k[1], k[0], got, r)
		}
	}
	s, err := must(policy.ReadMemory(state)).Read()
	if err != nil || s.IDs["com.test.one"].Version != "1.0.0" {
		t.Fatalf("the refused claim changed version memory: %v %+v", err, s.IDs["com.test.one"])
	}
	if strings.Contains(stderr.String(), "panic") {
		t.Fatal(stderr.String())
	}
}
