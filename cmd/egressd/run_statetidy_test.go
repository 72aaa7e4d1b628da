package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRunSetuidFileUnderAnUnreadableFolderIsClearedAndTheNextRunStarts: a
// normal user's run tidies the state folder after the program (no setuid or
// setgid file stays on the host disk) and before the next one. The program
// hid a setuid file under a folder of mode --x and a setgid file under one
// of mode 0, and made the state folder itself --x: the walk could not read
// them, the files kept their bits, and the next run failed with "state
// folder: permission denied". The walk gives such a folder u+rx while it
// reads it and puts its mode back; it still follows no symlink.
func TestRunSetuidFileUnderAnUnreadableFolderIsClearedAndTheNextRunStarts(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root to run egressd as another user")
		}
		t.Skip("needs root to run egressd as another user")
	}
	e := newSandboxEnv(t)
	const uid, gid = 64990, 64990
	bin := e.binaryForUser(uid, gid)
	outside := filepath.Join(t.TempDir(), "outside") // a symlink's target the walk must not touch
	os.Mkdir(outside, 0o100)
	os.Chown(outside, uid, gid)
	os.Chmod(filepath.Dir(outside), 0o755)
	asLauncher := func(script string) (string, string, int) {
		cmd := e.command(script)
		cmd.Path, cmd.Args[0] = bin, bin
		cmd.Env = append(cmd.Env, "HOME="+e.state)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
		return runCmd(t, cmd)
	}
	out, errs, code := asLauncher(`cd /var/lib/integration && mkdir hidden zero && cp /bin/true hidden/suid && cp /bin/true zero/sgid &&
chmod 4755 hidden/suid && chmod 2755 zero/sgid && ln -s ` + outside + ` link && chmod 100 hidden && chmod 0 zero && chmod 100 . && echo hidden`)
	if code != 0 || out != "hidden\n" {
		t.Fatalf("first run: exit %d, stdout %q, stderr %s", code, out, errs)
	}
	state := e.stateFolder("com.test.sandboxed")
	for _, f := range []string{"hidden/suid", "zero/sgid"} {
		st, err := os.Lstat(filepath.Join(state, f)) // the test is root: it reads through --x and 0
		if err != nil || st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s on the host after the run: %v (%v)", f, st.Mode(), err)
		}
	}
	for dir, want := range map[string]os.FileMode{"hidden": 0o100, "zero": 0, ".": 0o100, outside: 0o100} {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(state, dir)
		}
		if st, err := os.Lstat(dir); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: mode %v after the walk, want the program's %v (%v)", dir, st.Mode().Perm(), want, err)
		}
	}
	out, errs, code = asLauncher(`chmod 700 /var/lib/integration /var/lib/integration/hidden && ls /var/lib/integration/hidden && echo second run`)
	if code != 0 || out != "suid\nsecond run\n" || strings.Contains(errs, "permission denied") {
		t.Fatalf("second run: exit %d, stdout %q, stderr %s", code, out, errs)
	}
}
