package main

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestAReloadThatAddsASecondEntryForAServedFolderSaysSoOnStderr: round 35.
// serve serves folder a from a manifests: template; the operator adds an
// explicit, stricter entry for a and reloads. serve keeps the entry
// already serving a and refuses the new one, which only an audit line
// without an integration said: stderr, the journal, said nothing.
func TestAReloadThatAddsASecondEntryForAServedFolderSaysSoOnStderr(t *testing.T) {
	dir, socks := t.TempDir(), t.TempDir()
	a := erpFolder(t, mkdir(t, filepath.Join(dir, "m", "a")), "com.test.a", "1.0.0", "api.a.example")
	cfg := filepath.Join(dir, "egressd.yaml")
	base := "state_dir: " + filepath.Join(dir, "state") + "\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: " + filepath.Join(dir, "audit.log") + "}\n"
	template := "manifests:\n  - dir: " + filepath.Join(dir, "m") + "\n    listen: unix:" + socks + "/{name}.sock\n    allow_ports: [8443]\n"
	writeFile(t, cfg, base+template)
	var stdout, stderr lockedBuffer
	sig := make(chan os.Signal, 1)
	done := make(chan int, 1)
	go func() { done <- serve(context.Background(), []string{"--config", cfg}, &stdout, &stderr, sig) }()
	defer func() { sig <- syscall.SIGTERM; <-done }()
	waitFor(t, &stderr, `serving com.test.a on unix:`)
	writeFile(t, cfg, base+"integrations:\n  - manifest: "+a+"\n    listen: unix:"+socks+"/a-strict.sock\n"+template)
	sig <- syscall.SIGHUP
	waitFor(t, &stderr, `reload: .*already served.*this entry is refused and the entry already serving it stays as it is`)
}
