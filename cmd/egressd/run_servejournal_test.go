package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestServeAndRunCheckpointsInOneJournalEachVerifyTheirOwnFiles: on a
// host running egressd serve and egressd run under systemd, the journal
// holds both's checkpoints. serve's named no integration, so verifying a
// run's file with the whole journal failed on serve's chain, and the
// serve log with it failed on the run's. serve's genesis and checkpoints
// now say integration=serve (no integration id can be that: an id has a
// dot), so each verifies with the whole journal and notes the other's.
func TestServeAndRunCheckpointsInOneJournalEachVerifyTheirOwnFiles(t *testing.T) {
	e := newSandboxEnv(t)
	dir := t.TempDir()
	sp := startServeProcess(t, serveDir(t, dir, "\n  checkpoints: stderr"))
	connectReason(t, sp.listen, "evil0.example")
	sp.stop(t)
	yaml := "audit:\n  checkpoints: stderr\n"
	cmd := e.configured(yaml, "true")
	cmd.Args = e.perRunCommand(yaml, e.dir)
	_, errs, code := runCmd(t, cmd)
	f := regexp.MustCompile(`egressd run: audit log (\S+)`).FindStringSubmatch(errs)
	if code != 0 || f == nil {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	ckpt := filepath.Join(t.TempDir(), "journal")
	os.WriteFile(ckpt, []byte(sp.stderr.String()+errs), 0o600)
	out, errOut, code := runCLI(t, "audit", "verify", "--checkpoints", ckpt, f[1])
	if code != 0 || !strings.Contains(out, "other integrations (serve) ignored") {
		t.Fatalf("the run's file with the journal: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = runCLI(t, "audit", "verify", "--checkpoints", ckpt, filepath.Join(dir, "audit.log"))
	if code != 0 || !strings.Contains(out, "other integrations (com.test.sandboxed) ignored") {
		t.Fatalf("serve's log with the journal: exit %d\n%s%s", code, out, errOut)
	}
}
