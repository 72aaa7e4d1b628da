package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// listenerDupFixture is issue 17's fifth attack: an explicit integration on
// unix:SOCKS/victim.sock, and a manifests: folder whose {name}.sock
// template names the same socket for a folder called "victim".
type listenerDupFixture struct {
	dir, cfg, auditFile, socks, victimSock string
}

func newListenerDupFixture(t *testing.T) *listenerDupFixture {
	f := &listenerDupFixture{dir: t.TempDir(), socks: t.TempDir()}
	f.cfg, f.auditFile = filepath.Join(f.dir, "egressd.yaml"), filepath.Join(f.dir, "audit.log")
	f.victimSock = filepath.Join(f.socks, "victim.sock")
	os.MkdirAll(filepath.Join(f.dir, "victim"), 0o755)
	os.MkdirAll(filepath.Join(f.dir, "mdir"), 0o755)
	os.WriteFile(filepath.Join(f.dir, "victim", "manifest.json"), []byte(`{"manifest_version":1,"id":"com.a17.victim","version":"1.0.0","network":{"connect":["v.victim.example"]}}`), 0o600)
	os.WriteFile(f.cfg, []byte("state_dir: "+filepath.Join(f.dir, "state")+"\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: "+f.auditFile+"}\n"+
		"integrations:\n  - manifest: victim\n    listen: unix:"+f.victimSock+"\n"+
		"manifests:\n  - dir: mdir\n    listen: unix:"+f.socks+"/./{name}.sock\n"), 0o600)
	return f
}

// addNewcomer puts a folder named "victim" in the manifests dir: its
// socket is the victim's.
func (f *listenerDupFixture) addNewcomer(t *testing.T) {
	t.Helper()
	os.MkdirAll(filepath.Join(f.dir, "mdir", "victim"), 0o755)
	os.WriteFile(filepath.Join(f.dir, "mdir", "victim", "manifest.json"), []byte(`{"manifest_version":1,"id":"com.a17.newcomer","version":"1.0.0","network":{"connect":["good.newcomer.example"]}}`), 0o600)
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// TestManifestsDirFolderOnAnExplicitSocketPathDoesNotStart: with the
// newcomer's folder there at start, check --config and serve both refuse
// the config, and serve never touches the socket path.
func TestManifestsDirFolderOnAnExplicitSocketPathDoesNotStart(t *testing.T) {
	f := newListenerDupFixture(t)
	f.addNewcomer(t)
	out, errs, code := runCLI(t, "check", "--config", f.cfg)
	if code == exitOK || !strings.Contains(out+errs, "unix:"+f.victimSock) {
		t.Fatalf("check --config: exit %d: %s%s", code, out, errs)
	}
	out, errs, code = runCLI(t, "serve", "--config", f.cfg)
	if code == exitOK || strings.Contains(errs, "serving") || !strings.Contains(errs, "listen") {
		t.Fatalf("serve started with two integrations on one socket: exit %d: %s%s", code, out, errs)
	}
	if _, err := os.Lstat(f.victimSock); err == nil {
		t.Fatal("serve refused the config but bound the socket")
	}
}

// TestManifestsDirFolderOnAServedSocketPathIsARefusedReload: the newcomer
// arrives while the victim is served; the reload is refused whole, the
// victim's socket stays the one it bound, and its list stays its own.
func TestManifestsDirFolderOnAServedSocketPathIsARefusedReload(t *testing.T) {
	f := newListenerDupFixture(t)
	var stdout, stderr lockedBuffer
	sig := make(chan os.Signal, 1)
	done := make(chan int, 1)
	go func() { done <- serve(context.Background(), []string{"--config", f.cfg}, &stdout, &stderr, sig) }()
	waitFor(t, &stderr, `serving com.a17.victim on unix:`)
	before := inode(t, f.victimSock)
	f.addNewcomer(t)
	sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: f.auditFile}, `"action":"config_refused"[^\n]*victim.sock`)
	if after := inode(t, f.victimSock); after != before {
		t.Fatalf("the victim's socket was replaced (inode %d, now %d)", before, after)
	}
	if r := unixConnectReason(t, f.victimSock, "good.newcomer.example"); r != "not_allowlisted" {
		t.Fatalf("the newcomer's host through the victim's socket: %s\n%s", r, stderr.String())
	}
	if r := unixConnectReason(t, f.victimSock, "v.victim.example"); r != "dns_error" {
		t.Fatalf("the victim's own host: %s", r)
	}
	if strings.Contains(stderr.String(), "serving com.a17.newcomer") || strings.Count(stderr.String(), "serving com.a17.victim") != 1 {
		t.Fatalf("a second integration was served on the socket:\n%s", stderr.String())
	}
	sig <- syscall.SIGTERM
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}
