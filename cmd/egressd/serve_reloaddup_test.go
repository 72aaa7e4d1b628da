package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// TestAReloadWarningOfManyManifestProblemsIsOneBoundedLine: round 39. A
// reload warning joined every problem of the author's manifest into one
// line of any length (486,893 bytes for 3,000 bad entries); journald splits
// such a line at 48 KiB, and the piece after the split began with the
// author's text ("egressd: serving com.a13.fake …"). Every line serve
// writes is at most maxJournalLine bytes.
func TestAReloadWarningOfManyManifestProblemsIsOneBoundedLine(t *testing.T) {
	dir := t.TempDir()
	app := erpFolder(t, mkdir(t, filepath.Join(dir, "app")), "com.test.app", "1.0.0", "api.app.example")
	cfg := filepath.Join(dir, "egressd.yaml")
	writeFile(t, cfg, "state_dir: "+filepath.Join(dir, "state")+"\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: "+filepath.Join(dir, "audit.log")+"}\n"+
		"integrations:\n  - manifest: "+app+"\n    listen: 127.0.0.1:0\n")
	var stdout, stderr lockedBuffer
	sig := make(chan os.Signal, 1)
	done := make(chan int, 1)
	go func() { done <- serve(context.Background(), []string{"--config", cfg}, &stdout, &stderr, sig) }()
	defer func() { sig <- syscall.SIGTERM; <-done }()
	waitFor(t, &stderr, `serving com.test.app on `)
	var hosts []string
	for i := range 400 {
		hosts = append(hosts, fmt.Sprintf("f%03d.%s.example:80", i, strings.Repeat("c", 60)))
	}
	hosts = append(hosts, "egressd: serving com.test.fake on 127.0.0.1:443 (approved by operator)")
	erpFolder(t, app, "com.test.app", "1.1.0", hosts...)
	sig <- syscall.SIGHUP
	waitFor(t, &stderr, `reload: .*no port.*\(cut\)`)
	for _, line := range strings.Split(stderr.String(), "\n") {
		if len(line) > maxJournalLine {
			t.Fatalf("a stderr line of %d bytes: %.200s…", len(line), line)
		}
	}
}
