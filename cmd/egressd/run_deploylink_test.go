package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRunDeployLinkSwappedAfterTheManifestIsReadBindsTheCheckedFolder: the
// author's deploy/current link points at rel1 while egressd reads the
// manifest, and at a private host folder when the sandbox is built (the
// egressd_testhooks build swaps it there, as a racing author would). The
// folder bound must be the one whose manifest was read: the private file
// must not be visible inside, as root (open_tree) or as a normal user.
func TestRunDeployLinkSwappedAfterTheManifestIsReadBindsTheCheckedFolder(t *testing.T) {
	requireSandbox(t)
	bin := hookedBinary(t)
	for _, asUser := range []bool{false, true} {
		name := "root"
		if asUser {
			name = "user"
		}
		t.Run(name, func(t *testing.T) {
			w := t.TempDir()
			os.Chmod(filepath.Dir(w), 0o755) // the test's temporary root: a normal user walks through it
			os.Chmod(w, 0o755)
			deploy, private := filepath.Join(w, "deploy"), filepath.Join(w, "private")
			for _, d := range []string{filepath.Join(deploy, "rel1"), private} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			manifest := `{ "schemaVersion": 1, "id": "com.atk.linkswap", "version": "1.0.0", "name": "ls", "summary": "ls",
  "publisher": { "id": "pub_atk", "name": "atk" },
  "runtime": { "kind": "local-mcp", "command": "sh", "args": ["-c", "if [ -e ./host-secret.txt ]; then echo ESCAPED; cat ./host-secret.txt; else echo held; fi"] },
  "permissions": [{ "kind": "network", "domains": ["api.allowed.example"] }] }`
			if err := os.WriteFile(filepath.Join(deploy, "rel1", "voiceos.integration.json"), []byte(manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			// The private folder also holds a manifest, so a load through
			// the swapped link would succeed too.
			os.WriteFile(filepath.Join(private, "voiceos.integration.json"), []byte(manifest), 0o644)
			if err := os.WriteFile(filepath.Join(private, "host-secret.txt"), []byte("host secret\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(deploy, "current")
			if err := os.Symlink("rel1", link); err != nil {
				t.Fatal(err)
			}
			state := filepath.Join(w, "state")
			args := []string{"run", "--state", state, "--resolver", "127.0.0.1:9", link}
			hook := "EGRESSD_TESTHOOK_SWAP_LINK=" + link + "=" + private
			var cmd *exec.Cmd
			if asUser {
				uid := testUser(t)
				os.MkdirAll(state, 0o755)
				filepath.Walk(w, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, uid, uid) })
				os.Chmod(private, 0o700) // the user's own private folder
				userBin := filepath.Join(w, "egressd")
				data, err := os.ReadFile(bin)
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(userBin, data, 0o755)
				cmd = exec.Command("setpriv", append([]string{"--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(uid), "--clear-groups", "--", userBin}, args...)...)
				cmd.Env = append(os.Environ(), "HOME=/nonexistent", hook)
			} else {
				cmd = exec.Command(bin, args...)
				cmd.Env = append(os.Environ(), hook)
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if target, _ := os.Readlink(link); target != private {
				t.Fatalf("the test hook did not swap the link (it points at %q): %v\n%s", target, err, stderr.String())
			}
			if strings.Contains(stdout.String(), "ESCAPED") {
				t.Fatalf("the swapped link's private folder was bound into the sandbox:\n%s", stdout.String())
			}
			// Either the checked folder ran, or the run was refused: never the other one.
			if err == nil && !strings.Contains(stdout.String(), "held") {
				t.Fatalf("the program did not run in the checked folder: stdout %q stderr %q", stdout.String(), stderr.String())
			}
			switch {
			case err != nil && !asUser:
				t.Fatalf("as root the checked folder is cloned from its descriptor and runs: %v\n%s", err, stderr.String())
			case err != nil && !strings.Contains(stderr.String(), "is no longer the folder whose manifest was read"):
				t.Fatalf("refused for another reason: %v\n%s", err, stderr.String())
			}
		})
	}
}

// testUser is the unprivileged user the non-root tests run egressd as.
func testUser(t *testing.T) int {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test creates a user: it needs root, as ./scripts/test says")
		}
		t.Skip("this test creates a user; it needs root (CI runs as root)")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatal("setpriv is required")
	}
	const user = "egressd-test"
	if err := exec.Command("id", user).Run(); err != nil {
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", user).CombinedOutput(); err != nil {
			t.Fatalf("useradd: %v %s", err, out)
		}
	}
	out, err := exec.Command("id", "-u", user).Output()
	if err != nil {
		t.Fatal(err)
	}
	uid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	return uid
}
