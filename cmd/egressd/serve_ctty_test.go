package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// ttyNr is field 7 of /proc/PID/stat: the process's controlling terminal,
// 0 for none.
func ttyNr(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(data), ") ") // the name may hold spaces
	fields := strings.Fields(after)
	n, err := strconv.Atoi(fields[4])
	if err != nil {
		t.Fatalf("tty_nr in %q: %v", data, err)
	}
	return n
}

// TestSessionLeaderServeDoesNotTakeAManifestPtyAsItsTerminal is the
// round-6 attacker's s1_ctty_kill.sh: egressd serve runs as a session
// leader with no controlling terminal (systemd and container runtimes start
// it so); an integration that owns its folder makes its manifest a link to
// a pseudo-terminal it holds the master of. The reload watcher opened what
// the path resolves to without O_NOCTTY, the kernel made that terminal
// egressd's controlling one, and ^C typed on the master stopped egressd
// (^\ crashed it), cutting off every integration. Now the terminal is never
// egressd's: tty_nr stays 0, no session holds the terminal, and ^C reaches
// nobody.
func TestSessionLeaderServeDoesNotTakeAManifestPtyAsItsTerminal(t *testing.T) {
	bin := egressdBinary(t)
	dir := t.TempDir()
	integ := filepath.Join(dir, "hostile")
	os.Mkdir(integ, 0o755)
	manifest := filepath.Join(integ, "manifest.json")
	os.WriteFile(manifest, weatherManifest("1.0.0", `"api.weather.example"`), 0o644)
	auditFile := filepath.Join(dir, "audit.log")
	cmd := exec.Command(bin, "serve", "--manifest", integ, "--listen", "127.0.0.1:0",
		"--state", filepath.Join(dir, "state"), "--resolver", "127.0.0.1:9", "--audit-log", auditFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // a session leader with no terminal, as under systemd
	var stderr lockedBuffer
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			stderr.Write([]byte(sc.Text() + "\n"))
		}
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	pid := cmd.Process.Pid
	waitFor(t, &stderr, `serving com.test.weather on`)
	if n := ttyNr(t, pid); n != 0 {
		t.Fatalf("serve started with controlling terminal %d; the test needs none", n)
	}

	master, slave := openPTY(t)
	var shown lockedBuffer
	go func() {
		buf := make([]byte, 256)
		for {
			n, err := master.Read(buf)
			shown.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	link := filepath.Join(integ, ".manifest.json.new")
	if err := os.Symlink(slave.Name(), link); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(link, manifest); err != nil { // the "manifest" is now the hostile's terminal
		t.Fatal(err)
	}
	audit := &lockedFile{path: auditFile}
	waitFor(t, audit, `"action":"kept_last_good"`) // the watcher fingerprinted the link's target, then reloaded

	if n := ttyNr(t, pid); n != 0 {
		t.Errorf("serve's controlling terminal is now %d (tty_nr), the integration's pty", n)
	}
	if sid, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGSID); !errors.Is(err, unix.ENOTTY) {
		t.Errorf("the integration's pty belongs to session %d (%v); want none", sid, err)
	}
	if _, err := master.Write([]byte{0x03}); err != nil { // ^C typed by the integration
		t.Fatal(err)
	}
	waitFor(t, &shown, `\^C`) // the line discipline echoed it: any signal it makes has been sent
	cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, audit, `(?s)"action":"kept_last_good".*"action":"kept_last_good"`)
	select {
	case <-exited:
		t.Fatalf("serve exited after ^C on the integration's pty: %v\n%s", waitErr, stderr.String())
	default:
	}
	cmd.Process.Signal(syscall.SIGTERM)
	<-exited
	if waitErr != nil {
		t.Fatalf("serve: %v\n%s", waitErr, stderr.String())
	}
}
