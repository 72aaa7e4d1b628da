package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestApproveAsRootDoesNotChownTheFileAPlantedLockPointsTo is issue 13's
// B1: the state folder belongs to the service user, who replaces
// versions.lock (or versions.json) with a symlink to a root-owned file.
// approve and forget, run as root, opened the lock following the symlink
// and chowned and chmodded its target to the service user. Now they refuse,
// name the file, and leave the target as it was.
func TestApproveAsRootDoesNotChownTheFileAPlantedLockPointsTo(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("chown needs root in CI")
		}
		t.Skip("chown needs root")
	}
	const serviceUID = 4242
	for _, planted := range []string{"versions.lock", "versions.json"} {
		t.Run(planted, func(t *testing.T) {
			state, dir := t.TempDir(), t.TempDir()
			loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "erp.acme.example"))
			erpFolder(t, dir, "com.acme.erp", "1.1.0", "erp.acme.example", "new.acme.example")
			loadAsServe(t, state, dir)
			filepath.Walk(state, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, serviceUID, serviceUID) })

			victim := filepath.Join(t.TempDir(), "shadow")
			os.WriteFile(victim, []byte("root secret\n"), 0o644)
			link := filepath.Join(state, planted)
			if planted == "versions.json" { // keep the content: only the link differs
				data, _ := os.ReadFile(link)
				os.WriteFile(victim, data, 0o644)
			}
			os.Remove(link)
			if err := os.Symlink(victim, link); err != nil {
				t.Fatal(err)
			}
			os.Lchown(link, serviceUID, serviceUID)

			for _, args := range [][]string{
				{"approve", "--yes", "--state", state, "--digest", digestOf(t, dir), "com.acme.erp", "1.1.0"},
				{"approve", "--yes", "--state", state, "--manifest", dir},
				{"state", "--state", state, "forget", "com.acme.erp"},
			} {
				_, errs, code := runCLI(t, args...)
				st, err := os.Stat(victim)
				if err != nil {
					t.Fatal(err)
				}
				sys := st.Sys().(*syscall.Stat_t)
				if sys.Uid != 0 || sys.Gid != 0 || st.Mode().Perm() != 0o644 {
					t.Fatalf("%v: the target of the planted %s is now uid %d gid %d mode %v", args, planted, sys.Uid, sys.Gid, st.Mode().Perm())
				}
				if code != exitFail || !strings.Contains(errs, link) || !strings.Contains(errs, "not a regular file") {
					t.Fatalf("%v: exit %d, want a refusal that names %s: %s", args, code, link, errs)
				}
			}
		})
	}
}

// TestApproveAsRootDoesNotCopyAWorldWritableModeToVersionMemory: root's
// approve gives the rewritten state file the old file's owner and mode.
// The service user can chmod its file 0666 first; root then made version
// memory writable by every local user. Write bits for group and others
// are not copied.
func TestApproveAsRootDoesNotCopyAWorldWritableModeToVersionMemory(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("chown needs root in CI")
		}
		t.Skip("chown needs root")
	}
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "erp.acme.example"))
	erpFolder(t, dir, "com.acme.erp", "1.1.0", "erp.acme.example", "new.acme.example")
	loadAsServe(t, state, dir)
	filepath.Walk(state, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, 4242, 4242) })
	stateFile := filepath.Join(state, "versions.json")
	os.Chmod(stateFile, 0o666)
	if _, errs, code := runCLI(t, "approve", "--yes", "--state", state, "--digest", digestOf(t, dir), "com.acme.erp", "1.1.0"); code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	st, err := os.Stat(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	if sys := st.Sys().(*syscall.Stat_t); sys.Uid != 4242 || st.Mode().Perm()&0o022 != 0 {
		t.Fatalf("versions.json is uid %d mode %v after approve", sys.Uid, st.Mode().Perm())
	}
}
