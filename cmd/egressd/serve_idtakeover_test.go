package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/policy"
)

// takeover is issue 13's pin_digest takeover, served: A (com.t.a, its
// list's digest pinned) and the victim are served once; then the victim
// is retired from the config and A's author renames A to com.t.victim
// 5.0.0 with A's own list.
type takeover struct {
	dir, cfg, auditFile, state, sockA string
	sig                               chan os.Signal // the running serve's
}

func newTakeover(t *testing.T) *takeover {
	t.Helper()
	dir := t.TempDir()
	k := &takeover{dir: dir, cfg: filepath.Join(dir, "egressd.yaml"), auditFile: filepath.Join(dir, "audit.log"),
		state: filepath.Join(dir, "state"), sockA: filepath.Join(t.TempDir(), "a.sock")}
	k.manifest(t, "a", "com.t.a", "1.0.0", "api.a.example")
	k.manifest(t, "v", "com.t.victim", "1.0.0", "api.victim.example")
	k.config(t, k.pinOf(t), true)
	return k
}

func (k *takeover) manifest(t *testing.T, folder, id, version, host string) {
	t.Helper()
	os.MkdirAll(filepath.Join(k.dir, folder), 0o755)
	doc := `{"manifest_version":1,"id":"` + id + `","version":"` + version + `","network":{"connect":["` + host + `"]}}`
	if err := os.WriteFile(filepath.Join(k.dir, folder, "manifest.json"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (k *takeover) config(t *testing.T, pin string, victim bool) {
	t.Helper()
	doc := "state_dir: " + k.state + "\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: " + k.auditFile + "}\nintegrations:\n" +
		"  - manifest: a\n    listen: unix:" + k.sockA + "\n    pin_digest: \"" + pin + "\"\n"
	if victim {
		doc += "  - manifest: v\n    listen: unix:" + filepath.Join(filepath.Dir(k.sockA), "v.sock") + "\n"
	}
	if err := os.WriteFile(k.cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
}

// serve starts serve on k's config; stop ends it (at the test's end if
// not before).
func (k *takeover) serve(t *testing.T) (stderr *lockedBuffer, stop func()) {
	t.Helper()
	var stdout lockedBuffer
	stderr = &lockedBuffer{}
	sig := make(chan os.Signal, 1)
	k.sig = sig
	done := make(chan int, 1)
	go func() { done <- serve(context.Background(), []string{"--config", k.cfg}, &stdout, stderr, sig) }()
	var once sync.Once
	stop = func() { once.Do(func() { sig <- syscall.SIGTERM; <-done }) }
	t.Cleanup(stop)
	return stderr, stop
}

// reason sends CONNECT host to A's listener and returns the refusal's
// reason code (an allowed host fails later, at DNS: dns_error).
func (k *takeover) reason(t *testing.T, host string) string {
	t.Helper()
	return unixConnectReason(t, k.sockA, host)
}

// TestServePinnedIntegrationRenamedToAnothersIDWaitsAndLeavesTheVictimAlone:
// the pin covers A's list, not its id, so the rename waits for approve;
// A's approved list stays in force, and the victim's record, floor and
// folder binding are untouched.
func TestServePinnedIntegrationRenamedToAnothersIDWaitsAndLeavesTheVictimAlone(t *testing.T) {
	k := newTakeover(t)
	stderr, stop := k.serve(t)
	waitFor(t, stderr, `serving com\.t\.victim on unix:`)
	waitFor(t, stderr, `serving com\.t\.a on unix:`)
	stop()

	k.manifest(t, "a", "com.t.victim", "5.0.0", "api.a.example")
	pin := k.pinOf(t)
	k.config(t, pin, false)
	stderr, stop = k.serve(t)
	defer stop()
	waitFor(t, stderr, `changed its id from com\.t\.a to com\.t\.victim 5\.0\.0 .*waits for the operator's approval`)
	waitFor(t, stderr, `serving com\.t\.a on unix:`) // the listener is up: the notice comes before it
	if got := k.reason(t, "api.a.example"); got != "dns_error" {
		t.Fatalf("A's approved list is not in force: %s", got)
	}
	s, err := must(policy.ReadMemory(k.state)).Read()
	if err != nil {
		t.Fatal(err)
	}
	if r := s.IDs["com.t.victim"]; r.Version != "1.0.0" || len(r.Approved.Entries) != 1 || r.Approved.Entries[0] != "api.victim.example" {
		t.Fatalf("the rename rewrote the victim's record: %+v", r)
	}
	if got := s.FoldersOf("com.t.victim"); len(got) != 1 || got[0] != filepath.Join(k.dir, "v") {
		t.Fatalf("folders of the victim: %v", got)
	}
}

// pinOf is the digest of A's list as the manifest holds it now.
func (k *takeover) pinOf(t *testing.T) string {
	t.Helper()
	rules := policy.DefaultConfig().Rules
	m, _, _, err := allowlist.Load(filepath.Join(k.dir, "a", "manifest.json"), &rules)
	if err != nil || m == nil {
		t.Fatal(err)
	}
	return m.Digest()
}

// TestServeEventsOfAWaitingIDChangeAreFiledUnderTheIDInForce: while A's
// rename waits, its connect and policy events carry the id and version in
// force (com.t.a 1.0.0) with the change in pending, the kept_last_good line
// names com.t.a 1.0.0 as in force, and the report groups them under com.t.a.
func TestServeEventsOfAWaitingIDChangeAreFiledUnderTheIDInForce(t *testing.T) {
	k := newTakeover(t)
	stderr, stop := k.serve(t)
	waitFor(t, stderr, `serving com\.t\.a on unix:`)
	stop()

	k.manifest(t, "a", "com.t.victim", "5.0.0", "api.a.example")
	k.config(t, k.pinOf(t), false)
	stderr, stop = k.serve(t)
	waitFor(t, stderr, `changed its id from com\.t\.a to com\.t\.victim 5\.0\.0`)
	waitFor(t, stderr, `serving com\.t\.a on unix:`) // the listener is up: the notice comes before it
	log := &lockedFile{path: k.auditFile}
	waitFor(t, log, `"event":"policy","integration":"com\.t\.a","integration_version":"1\.0\.0",[^\n]*"action":"pending","pending":"com\.t\.victim 5\.0\.0"`)
	if got := k.reason(t, "elsewhere.example"); got != "not_allowlisted" {
		t.Fatalf("reason %s", got)
	}
	waitFor(t, log, `"event":"connect","integration":"com\.t\.a","integration_version":"1\.0\.0",[^\n]*"host":"elsewhere\.example"[^\n]*"pending":"com\.t\.victim 5\.0\.0"`)

	os.WriteFile(filepath.Join(k.dir, "a", "manifest.json"), []byte("{"), 0o600) // a broken reload
	k.sig <- syscall.SIGHUP
	waitFor(t, stderr, `reload: [^\n]*/a: [^\n]*; the last good policy \(com\.t\.a 1\.0\.0\) stays in force`)
	waitFor(t, log, `"event":"policy","integration":"com\.t\.a","integration_version":"1\.0\.0",[^\n]*"action":"kept_last_good"`)
	_, second, _ := strings.Cut(log.String(), `"prev_run=`) // the second serve's chain
	if strings.Contains(second, `"integration":"com.t.victim"`) || strings.Contains(second, `"claim"`) {
		t.Fatalf("an event is filed under the unapproved id:\n%s", second)
	}
	stop() // the report reads a closed log
	out, errs, code := runCLI(t, "audit", "report", k.auditFile)
	ownA, victim, _ := strings.Cut(out, "== com.t.victim") // its section holds the first serve's lines only
	if code != 0 || !strings.Contains(ownA, "== com.t.a") || !strings.Contains(ownA, "elsewhere.example") ||
		!strings.Contains(ownA, "pending com.t.victim 5.0.0 awaits approval") || strings.Contains(victim, "elsewhere.example") || strings.Contains(victim, "pending") {
		t.Fatalf("report (exit %d, %s):\n%s", code, errs, out)
	}
}
