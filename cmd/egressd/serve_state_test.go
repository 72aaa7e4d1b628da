package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// serviceUser returns an ordinary user (made with useradd) to run egressd
// as, entered with setpriv, as a systemd unit's User= would.
func serviceUser(t *testing.T) (name string, uid, gid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test creates a user; CI runs as root")
		}
		t.Skip("this test creates a user; it needs root")
	}
	for _, tool := range []string{"useradd", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required", tool)
		}
	}
	const user = "egressd-test"
	if err := exec.Command("id", user).Run(); err != nil {
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", user).CombinedOutput(); err != nil {
			t.Fatalf("useradd: %v %s", err, out)
		}
	}
	out, _ := exec.Command("id", "-u", user).Output()
	uid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	out, _ = exec.Command("id", "-g", user).Output()
	gid, err = strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	return user, uid, gid
}

// asUser is a command running the egressd binary bin as user.
func asUser(user, bin string, args ...string) *exec.Cmd {
	cmd := exec.Command("setpriv", append([]string{"--reuid=" + user, "--regid=" + user, "--clear-groups", "--", bin}, args...)...)
	cmd.Env = append(os.Environ(), "HOME=/nonexistent")
	return cmd
}

// userServe is "egressd serve" running as another user, in its own process.
type userServe struct {
	cmd    *exec.Cmd
	stderr lockedBuffer
	listen string
}

func startUserServe(t *testing.T, user, bin string, args ...string) *userServe {
	t.Helper()
	us := &userServe{cmd: asUser(user, bin, append([]string{"serve"}, args...)...)}
	pipe, err := us.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := us.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			us.stderr.Write([]byte(sc.Text() + "\n"))
		}
	}()
	t.Cleanup(func() { us.cmd.Process.Kill(); us.cmd.Wait() })
	us.listen = waitFor(t, &us.stderr, `serving com.test.weather on (127\.0\.0\.1:\d+)|cannot start.*|permission denied`)[1]
	if us.listen == "" {
		t.Fatalf("serve as %s did not start:\n%s", user, us.stderr.String())
	}
	return us
}

func (us *userServe) stop(t *testing.T) {
	t.Helper()
	us.cmd.Process.Signal(syscall.SIGTERM)
	if err := us.cmd.Wait(); err != nil {
		t.Fatalf("serve: %v\n%s", err, us.stderr.String())
	}
}

// TestApproveAsRootKeepsTheServiceUsersVersionMemory is issue 13.2: the
// service runs as its own user; root approves a widening; the state file
// stays the service user's, the reload applies the approval, and a restart
// starts. Approving as a user who cannot keep the file its owner's is
// refused with a message that says so.
func TestApproveAsRootKeepsTheServiceUsersVersionMemory(t *testing.T) {
	user, uid, gid := serviceUser(t)
	root := t.TempDir()
	os.Chmod(root, 0o755)
	os.Chmod(filepath.Dir(root), 0o755) // the test's temporary root
	bin := filepath.Join(root, "egressd")
	data, err := os.ReadFile(egressdBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(bin, data, 0o755)
	dir := filepath.Join(root, "srv")
	state := filepath.Join(dir, "state")
	auditFile := filepath.Join(dir, "audit.log")
	os.MkdirAll(filepath.Join(dir, "weather"), 0o755)
	os.MkdirAll(state, 0o700)
	manifest := filepath.Join(dir, "weather", "manifest.json")
	os.WriteFile(manifest, weatherManifest("1.0.0", `"api.weather.example"`), 0o644)
	cfg := filepath.Join(dir, "egressd.yaml")
	os.WriteFile(cfg, []byte("state_dir: "+state+"\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: "+auditFile+"}\nintegrations:\n  - manifest: weather\n    listen: 127.0.0.1:0\n"), 0o644)
	filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, uid, gid) })

	sv := startUserServe(t, user, bin, "--config", cfg)
	stateFile := filepath.Join(state, "versions.json")
	st, err := os.Stat(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	mode := st.Mode().Perm()

	os.WriteFile(manifest, weatherManifest("1.1.0", `"api.weather.example","new.weather.example"`), 0o644)
	sv.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, &lockedFile{path: auditFile}, `"action":"pending","pending":"1.1.0"`)
	if r := connectReason(t, sv.listen, "new.weather.example"); r != "pending_approval" {
		t.Fatalf("pending widening: %s", r)
	}
	waitFor(t, &sv.stderr, `warning: com.test.weather 1.1.0 adds new.weather.example to its network list \(list digest `+digestOf(t, filepath.Dir(manifest))+`\); it waits for the operator's approval \(egressd approve --state `+regexp.QuoteMeta(state)+` --digest `+digestOf(t, filepath.Dir(manifest))+` com.test.weather 1.1.0\)`)

	out, err := exec.Command(bin, "approve", "--yes", "--state", state, "--digest", digestOf(t, filepath.Dir(manifest)), "com.test.weather", "1.1.0").CombinedOutput()
	if err != nil {
		t.Fatalf("approve as root: %v %s", err, out)
	}
	for _, f := range []string{stateFile, filepath.Join(state, "versions.lock")} {
		st, _ := os.Stat(f)
		if sys := st.Sys().(*syscall.Stat_t); int(sys.Uid) != uid || int(sys.Gid) != gid || (f == stateFile && st.Mode().Perm() != mode) {
			t.Fatalf("%s is uid %d gid %d mode %v after approve, want uid %d mode %v", f, sys.Uid, sys.Gid, st.Mode().Perm(), uid, mode)
		}
	}
	sv.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, &lockedFile{path: auditFile}, `"integration_version":"1.1.0","generation":\d+,"action":"loaded"`)
	if r := connectReason(t, sv.listen, "new.weather.example"); r != "dns_error" { // allowed: the resolver answers nothing
		t.Fatalf("approved widening: %s\n%s", r, sv.stderr.String())
	}
	sv.stop(t)
	startUserServe(t, user, bin, "--config", cfg).stop(t) // a restart starts

	// The other way round: the state is root's, and the user approves.
	os.Chown(stateFile, 0, 0)
	os.Chown(filepath.Join(state, "versions.lock"), 0, 0)
	os.Chmod(state, 0o777)
	out, err = asUser(user, bin, "approve", "--yes", "--state", state, "com.test.weather", "1.1.0").CombinedOutput()
	if err == nil || !regexp.MustCompile(`version memory .*versions.json belongs to uid 0, and this process runs as uid \d+: .* run this as uid 0 or as root`).Match(out) {
		t.Fatalf("approve as another user: %v %s", err, out)
	}
}
