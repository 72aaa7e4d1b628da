package main

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestRunLauncherGroupCannotReadAGroupSecretUnderEtc: a non-root launcher's
// supplementary groups still count inside (an unprivileged user namespace
// must write setgroups=deny), and /etc/ssl was bound whole, private/ too:
// a launcher in ssl-cert read the host's TLS keys from inside. Nothing
// under /etc that is not world-readable is bound.
func TestRunLauncherGroupCannotReadAGroupSecretUnderEtc(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root to run egressd as another user")
		}
		t.Skip("needs root to run egressd as another user")
	}
	e := newSandboxEnv(t)
	const uid, gid, secretGroup = 64990, 64990, 64991
	secretDir := filepath.Join("/etc/ssl", "egressd-test-private-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(secretDir, 0o710); err != nil {
		t.Skip("cannot make a folder under /etc/ssl:", err)
	}
	t.Cleanup(func() { os.RemoveAll(secretDir) })
	secret := filepath.Join(secretDir, "key.pem")
	os.WriteFile(secret, []byte("HOST-PRIVATE-KEY\n"), 0o640)
	os.Chmod(secretDir, 0o710) // umask
	for _, p := range []string{secretDir, secret} {
		if err := os.Chown(p, 0, secretGroup); err != nil {
			t.Fatal(err)
		}
	}
	bin := e.binaryForUser(uid, gid)
	cmd := e.command(`cat ` + secret + ` 2>&1; echo rc=$?`)
	cmd.Path, cmd.Args[0] = bin, bin
	cmd.Env = append(cmd.Env, "HOME="+e.state)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{secretGroup}}}
	out, errs, _ := runCmd(t, cmd)
	if strings.Contains(out, "HOST-PRIVATE-KEY") || !strings.Contains(out, "rc=") {
		t.Fatalf("the program read a group-only secret under /etc:\nstdout %s\nstderr %s", out, errs)
	}
}

// binaryForUser hands e's integration folder and state to uid:gid and
// returns a copy of egressd that user can run (the test binary's folder
// is root's alone).
func (e *sandboxEnv) binaryForUser(uid, gid int) string {
	bin := filepath.Join(e.t.TempDir(), "egressd")
	copyExecutable(e.t, egressdBinary(e.t), bin)
	for _, d := range []string{filepath.Dir(bin), filepath.Dir(e.dir), filepath.Dir(e.state)} {
		os.Chmod(d, 0o755)
	}
	for _, d := range []string{e.dir, e.state} {
		filepath.Walk(d, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, uid, gid) })
	}
	return bin
}

func copyExecutable(t *testing.T, from, to string) {
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
