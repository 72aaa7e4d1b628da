package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRefusesASymlinkedAuditFolderInTheState is the sixth attacker's
// b8: the state folder may be the service user's, who replaced
// STATE/audit with a symlink; root's "egressd run" then created its log
// and replaced NAME.lastrun in whatever folder the link named. run now
// refuses a STATE/audit that is not a real folder, in one line, and writes
// nothing through it.
func TestRunRefusesASymlinkedAuditFolderInTheState(t *testing.T) {
	state, target := t.TempDir(), t.TempDir()
	if err := os.Symlink(target, filepath.Join(state, "audit")); err != nil {
		t.Fatal(err)
	}
	_, errs, code := runCLI(t, "run", "--state", state, "--resolver", "127.0.0.1:9", "../../configs/examples/coffee-tracker", "--", "/bin/true")
	if code == exitOK || !strings.Contains(errs, filepath.Join(state, "audit")+" is not a folder") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if left, _ := os.ReadDir(target); len(left) != 0 {
		t.Fatalf("run wrote through the link: %v", left)
	}
}

// TestRootRunDoesNotFollowSymlinksPlantedAtStateSandboxFolders is round
// 9's b5: the state folder's owner (the service user) planted
// STATE/sandbox and STATE/sandbox-images as symlinks to a root-only
// folder; root's "egressd run" followed them, made a folder chowned to the
// sandbox uid there and a 1 GB state image. Every folder egressd makes
// under STATE is opened without following a link: run refuses in one
// line naming it, and nothing is made where the link points.
func TestRootRunDoesNotFollowSymlinksPlantedAtStateSandboxFolders(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the state image is root's")
		}
		t.Skip("the state image is root's")
	}
	for _, planted := range []string{"sandbox", "sandbox-images", "audit"} {
		t.Run(planted, func(t *testing.T) {
			state, victim := t.TempDir(), t.TempDir()
			link := filepath.Join(state, planted)
			if err := os.Symlink(victim, link); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(egressdBinary(t), "run", "--state", state, "--resolver", "127.0.0.1:9", "../../configs/examples/coffee-tracker", "--", "/bin/true")
			_, errs, code := runCmd(t, cmd)
			refusal := errs
			if _, after, named := strings.Cut(errs, ".log\n"); named { // the line naming the run's audit log
				refusal = after
			}
			if code == exitOK || !strings.Contains(refusal, link+" is not a folder") || strings.Count(strings.TrimSpace(refusal), "\n") != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if left, _ := os.ReadDir(victim); len(left) != 0 {
				t.Fatalf("run made %v where the planted %s points", left, planted)
			}
		})
	}
}
