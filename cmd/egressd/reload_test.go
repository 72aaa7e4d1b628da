package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// threadBlockedOnFIFO reports whether a thread of this process waits in
// open(2) for a FIFO's writer ("wait_for_partner" in its wchan).
func threadBlockedOnFIFO() bool {
	tasks, _ := filepath.Glob("/proc/self/task/*/wchan")
	for _, t := range tasks {
		if b, _ := os.ReadFile(t); strings.Contains(string(b), "wait_for_partner") {
			return true
		}
	}
	return false
}

// TestServeFIFOManifestLeavesReadyzAndSIGTERMAnswering: a FIFO put where a
// manifest was made the reload block in open(2) while holding the daemon's
// lock, on the signal loop: /readyz timed out and SIGTERM did nothing.
// Now the reload reads files on its own goroutine without the lock; the
// probe answers and SIGTERM stops egressd cleanly, whatever the loader
// does with the FIFO (blocks, or refuses it).
func TestServeFIFOManifestLeavesReadyzAndSIGTERMAnswering(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "weather", "manifest.json")
	os.MkdirAll(filepath.Dir(manifest), 0o755)
	os.WriteFile(manifest, weatherManifest("1.0.0", `"api.weather.example"`), 0o600)
	cfg := filepath.Join(dir, "egressd.yaml")
	auditFile := filepath.Join(dir, "audit.log")
	os.WriteFile(cfg, []byte("state_dir: "+filepath.Join(dir, "state")+"\nadmin: 127.0.0.1:0\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: "+auditFile+"}\nintegrations:\n  - manifest: weather\n    listen: 127.0.0.1:0\n"), 0o600)
	sv := startServe(t, "--config", cfg)
	admin := waitFor(t, &sv.stderr, `admin on (127\.0\.0\.1:\d+)`)[1]

	os.Remove(manifest)
	if err := syscall.Mkfifo(manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // let a reader still waiting in open(2) go
		if f, err := os.OpenFile(manifest, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	sv.sig <- syscall.SIGHUP
	// Wait until the reload is blocked on the FIFO, or has refused it.
	audit := &lockedFile{path: auditFile}
	for deadline := time.Now().Add(10 * time.Second); !threadBlockedOnFIFO() && !strings.Contains(audit.String(), `"action":"kept_last_good"`); {
		if time.Now().After(deadline) {
			t.Fatal("the reload neither blocked on the FIFO nor refused it")
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + admin + "/readyz")
	if err != nil {
		t.Fatalf("/readyz while a reload reads a FIFO: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/readyz = %d while the last good policy serves", resp.StatusCode)
	}
	if r := connectReason(t, sv.listen, "evil.example"); r != "not_allowlisted" {
		t.Fatalf("the listener stopped deciding: %s", r)
	}
	sv.stop(t)
	if !strings.Contains(audit.String(), `"action":"shutdown"`) {
		t.Fatalf("no clean shutdown record:\n%s", audit.String())
	}
}

// TestServeReloadAppliesLimitsAndRefusesRestartOnlySettings: limits,
// timeouts and audit.on_failure were fixed when a listener opened, and a
// reload that changed them was accepted silently. Now a reload applies
// them (a rate cut to one request makes the next CONNECTs 503
// limit_exceeded), and a change only a restart can apply (resolvers) is
// refused with a message that names it.
func TestServeReloadAppliesLimitsAndRefusesRestartOnlySettings(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "weather"), 0o755)
	os.WriteFile(filepath.Join(dir, "weather", "manifest.json"), weatherManifest("1.0.0", `"api.weather.example"`), 0o600)
	cfg := filepath.Join(dir, "egressd.yaml")
	auditFile := filepath.Join(dir, "audit.log")
	writeConfig := func(extra string) {
		os.WriteFile(cfg, []byte("state_dir: "+filepath.Join(dir, "state")+"\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: "+auditFile+"}\n"+extra+"integrations:\n  - manifest: weather\n    listen: 127.0.0.1:0\n"), 0o600)
	}
	writeConfig("")
	sv := startServe(t, "--config", cfg)
	audit := &lockedFile{path: auditFile}
	for range 3 {
		if r := connectReason(t, sv.listen, "evil.example"); r != "not_allowlisted" {
			t.Fatalf("before the reload: %s", r)
		}
	}

	writeConfig("limits: {connections_per_second: 0.001, burst: 1}\n")
	sv.sig <- syscall.SIGHUP
	waitFor(t, audit, `"generation":2,"action":"unchanged"|"generation":2,"action":"loaded"`)
	reasons := []string{connectReason(t, sv.listen, "evil.example"), connectReason(t, sv.listen, "evil.example"), connectReason(t, sv.listen, "evil.example")}
	if reasons[2] != "limit_exceeded" {
		t.Fatalf("after lowering the rate to one request: %v", reasons)
	}

	writeConfig("limits: {connections_per_second: 0.001, burst: 1}\n")
	os.WriteFile(cfg, []byte(strings.Replace(string(must(os.ReadFile(cfg))), "127.0.0.1:9", "127.0.0.1:53", 1)), 0o600)
	sv.sig <- syscall.SIGHUP
	m := waitFor(t, audit, `"action":"config_refused",.*"error":"([^"]*)"`)
	if !strings.Contains(m[1], "resolvers") || !strings.Contains(m[1], "restart") {
		t.Fatalf("the refusal does not name the setting: %s", m[1])
	}
	waitFor(t, &sv.stderr, `reload: .*resolvers.*only a restart applies`)
	sv.stop(t)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestServeReloadHandsAListenerAddressToAnotherIntegration: a reload that
// removes one integration and gives its address to another must free the
// address before opening the new listener, although the removed one's
// tunnels drain after the reload's lock is released.
func TestServeReloadHandsAListenerAddressToAnotherIntegration(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"one", "two"} {
		os.MkdirAll(filepath.Join(dir, n), 0o755)
		os.WriteFile(filepath.Join(dir, n, "manifest.json"), []byte(`{"manifest_version":1,"id":"com.test.`+n+`","version":"1.0.0","network":{"connect":["api.`+n+`.example"]}}`), 0o600)
	}
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	cfg := filepath.Join(dir, "egressd.yaml")
	auditFile := filepath.Join(dir, "audit.log")
	writeConfig := func(name string) {
		os.WriteFile(cfg, []byte("state_dir: "+filepath.Join(dir, "state")+"\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: "+auditFile+"}\nintegrations:\n  - manifest: "+name+"\n    listen: unix:"+sock+"\n"), 0o600)
	}
	writeConfig("one")
	var stdout, stderr lockedBuffer
	sig := make(chan os.Signal, 1)
	done := make(chan int, 1)
	go func() { done <- serve(context.Background(), []string{"--config", cfg}, &stdout, &stderr, sig) }()
	waitFor(t, &stderr, `serving com.test.one on unix:`)
	connect := func(host string) string { return unixConnectReason(t, sock, host) }
	if r := connect("api.one.example"); r != "dns_error" {
		t.Fatalf("one: %s", r)
	}
	writeConfig("two")
	sig <- syscall.SIGHUP
	// A listener is not a place (issue 17, fifth attacker): two is its own
	// integration, a first load, served on the freed address at once.
	waitFor(t, &lockedFile{path: auditFile}, `"integration":"com.test.two","integration_version":"1.0.0","generation":2,[^\n]*"action":"listening"`)
	if r := connect("api.two.example"); r != "dns_error" {
		t.Fatalf("two on the freed address: %s\n%s", r, stderr.String())
	}
	if r := connect("api.one.example"); r != "not_allowlisted" {
		t.Fatalf("one's list in force for two: %s\n%s", r, stderr.String())
	}
	if strings.Contains(stderr.String(), "reload:") {
		t.Fatalf("the reload failed:\n%s", stderr.String())
	}
	sig <- syscall.SIGTERM
	<-done
}

// unixConnectReason sends "CONNECT host:443" to the unix listener at sock
// and returns the answer's reason code.
func unixConnectReason(t *testing.T, sock, host string) string {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT "+host+":443 HTTP/1.1\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Get("X-Egress-Reason")
}
