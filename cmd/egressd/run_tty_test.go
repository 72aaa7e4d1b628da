package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair through /dev/ptmx.
func openPTY(t *testing.T) (master, slave *os.File) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skip("no /dev/ptmx:", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

// TestRunProgramCannotLeaveTheTerminalBroken: run from a terminal, the
// program turned echo off, resized the window, set the n_null line
// discipline and stopped output, and the user's terminal stayed dead after
// egressd exited. Whether the kernel lets each call through (a seccomp
// filter may refuse some), the terminal must work after egressd exits.
func TestRunProgramCannotLeaveTheTerminalBroken(t *testing.T) {
	e := newSandboxEnv(t)
	master, slave := openPTY(t)
	sfd := int(slave.Fd())
	if err := unix.IoctlSetWinsize(sfd, unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120}); err != nil {
		t.Fatal(err)
	}
	before, err := unix.IoctlGetTermios(sfd, unix.TCGETS)
	if err != nil || before.Lflag&unix.ECHO == 0 {
		t.Fatalf("fresh pty: %+v %v", before, err)
	}
	var shown bytes.Buffer
	drained := make(chan struct{})
	go func() { io.Copy(&shown, master); close(drained) }() // never let the pty's buffer fill
	cmd := e.command(`stty -echo -icanon rows 2 cols 3; echo modes_changed; ` +
		`perl -e 'my $d = pack("i", 27); my $off = 0; ioctl(STDIN, 0x5423, $d) or print "setd: $!\n"; ioctl(STDOUT, 0x540A, $off) or print "xonc: $!\n"'`)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	if err := cmd.Run(); err != nil {
		slave.Close()
		<-drained
		t.Fatalf("egressd: %v\n%s", err, shown.String())
	}
	if ld, err := unix.IoctlGetInt(sfd, unix.TIOCGETD); err != nil || ld != 0 {
		t.Errorf("line discipline %d after exit (%v), want n_tty", ld, err)
	}
	after, err := unix.IoctlGetTermios(sfd, unix.TCGETS)
	if err != nil || *after != *before {
		t.Errorf("termios after exit:\n%+v\nwant\n%+v (%v)", after, before, err)
	}
	if ws, err := unix.IoctlGetWinsize(sfd, unix.TIOCGWINSZ); err != nil || ws.Row != 40 || ws.Col != 120 {
		t.Errorf("window %+v after exit (%v), want 40x120", ws, err)
	}
	// Output flows: a line written to the terminal reaches its reader.
	slave.SetWriteDeadline(time.Now().Add(10 * time.Second)) // bounds a failure only
	if _, err := slave.WriteString("terminal works\n"); err != nil {
		t.Fatalf("write to the terminal after exit: %v", err)
	}
	slave.Close()
	<-drained
	if !strings.Contains(shown.String(), "modes_changed") || !strings.Contains(shown.String(), "terminal works") {
		t.Fatalf("terminal showed %q", shown.String())
	}
}

// TestRunProgramCannotLeaveTheTerminalNonBlocking: the program set
// O_NONBLOCK on its stdin, which is the open file description the user's
// shell reads from, and egressd never undid it: the shell's next read
// failed with EAGAIN. The file status flags of fds 0, 1 and 2 come back.
func TestRunProgramCannotLeaveTheTerminalNonBlocking(t *testing.T) {
	e := newSandboxEnv(t)
	master, slave := openPTY(t)
	sfd := int(slave.Fd()) // Fd puts the file in blocking mode
	before, err := unix.FcntlInt(uintptr(sfd), unix.F_GETFL, 0)
	if err != nil || before&unix.O_NONBLOCK != 0 {
		t.Fatalf("fresh pty flags %#x (%v)", before, err)
	}
	var shown bytes.Buffer
	drained := make(chan struct{})
	go func() { io.Copy(&shown, master); close(drained) }()
	cmd := e.command(`perl -e 'use Fcntl; for my $fh (*STDIN, *STDOUT, *STDERR) { fcntl($fh, F_SETFL, O_NONBLOCK|O_APPEND) or print "setfl: $!\n" } ` +
		`print "flags ", fcntl(STDIN, F_GETFL, 0) & O_NONBLOCK ? "nonblocking" : "blocking", "\n"'`)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	runErr := cmd.Run()
	after, err := unix.FcntlInt(uintptr(sfd), unix.F_GETFL, 0)
	slave.Close()
	<-drained
	if runErr != nil || !strings.Contains(shown.String(), "flags nonblocking") {
		t.Fatalf("egressd: %v; the program did not set O_NONBLOCK:\n%s", runErr, shown.String())
	}
	if err != nil || after != before {
		t.Fatalf("file status flags after exit %#x, want %#x (%v)", after, before, err)
	}
}

// TestRunProgramCannotLeaveTheTerminalExclusive: TIOCEXCL makes a terminal
// refuse every further open(2) but root's, and the terminal's save and
// restore put back its modes, line discipline, size and flags but not its
// exclusive mode. In the sandbox the seccomp filter refuses TIOCEXCL;
// where nothing refuses it (--insecure-env-only, or a filter that is
// missing), the program sets it and the terminal must still be
// non-exclusive after egressd exits.
func TestRunProgramCannotLeaveTheTerminalExclusive(t *testing.T) {
	e := newSandboxEnv(t)
	const script = `perl -e 'if (ioctl(STDIN, 0x540C, 0)) { print "exclusive set\n" } else { print "excl: $!\n" }'`
	cases := []struct {
		name, want string
		command    func() *exec.Cmd
	}{
		// The filter refuses the call; without it, it finds a pipe: the
		// program never holds the terminal (egressd relays it).
		{"sandboxed", "excl: Operation not permitted", func() *exec.Cmd { return e.command(script) }},
		{"seccomp_off", "excl: Inappropriate ioctl for device", func() *exec.Cmd {
			cmd := e.command(script)
			cmd.Path, cmd.Args[0] = hookedBinary(t), hookedBinary(t)
			cmd.Env = append(cmd.Env, "EGRESSD_TESTHOOK_LAYERS_OFF=seccomp")
			return cmd
		}},
		{"insecure_env_only", "exclusive set", func() *exec.Cmd {
			cmd := e.command(script)
			cmd.Args = append(cmd.Args[:2], append([]string{"--insecure-env-only"}, cmd.Args[2:]...)...)
			return cmd
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			master, slave := openPTY(t)
			var shown bytes.Buffer
			drained := make(chan struct{})
			go func() { io.Copy(&shown, master); close(drained) }()
			cmd := tc.command()
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
			runErr := cmd.Run()
			excl, err := unix.IoctlGetInt(int(slave.Fd()), unix.TIOCGEXCL)
			slave.Close()
			<-drained
			if runErr != nil || !strings.Contains(shown.String(), tc.want) {
				t.Fatalf("egressd: %v; want %q from the program:\n%s", runErr, tc.want, shown.String())
			}
			if err != nil || excl != 0 {
				t.Fatalf("the terminal is exclusive (%d) after egressd exited (%v)", excl, err)
			}
		})
	}
}

// TestRunProgramCannotClearTheUsersExclusiveTerminal: the other way round,
// a user whose terminal is exclusive keeps it so. In the sandbox the filter
// refuses TIOCNXCL; where nothing refuses it, the restore sets it again.
func TestRunProgramCannotClearTheUsersExclusiveTerminal(t *testing.T) {
	e := newSandboxEnv(t)
	const script = `perl -e 'if (ioctl(STDIN, 0x540D, 0)) { print "exclusive cleared\n" } else { print "nxcl: $!\n" }'`
	for _, tc := range []struct {
		name, flag, want string
	}{
		{"sandboxed", "", "nxcl: Operation not permitted"},
		{"insecure_env_only", "--insecure-env-only", "exclusive cleared"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			master, slave := openPTY(t)
			if err := unix.IoctlSetInt(int(slave.Fd()), unix.TIOCEXCL, 0); err != nil {
				t.Fatal(err)
			}
			var shown bytes.Buffer
			drained := make(chan struct{})
			go func() { io.Copy(&shown, master); close(drained) }()
			cmd := e.command(script)
			if tc.flag != "" {
				cmd.Args = append(cmd.Args[:2], append([]string{tc.flag}, cmd.Args[2:]...)...)
			}
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
			runErr := cmd.Run()
			excl, err := unix.IoctlGetInt(int(slave.Fd()), unix.TIOCGEXCL)
			slave.Close()
			<-drained
			if runErr != nil || !strings.Contains(shown.String(), tc.want) {
				t.Fatalf("egressd: %v; want %q from the program:\n%s", runErr, tc.want, shown.String())
			}
			if err != nil || excl != 1 {
				t.Fatalf("the terminal is not exclusive (%d) after egressd exited (%v)", excl, err)
			}
		})
	}
}

// TestRunBackgroundProgramCannotReadWhatTheUserTypesToTheShell is issue
// 19's fifth attacker, finding 1: the program runs in a session of its own,
// outside the terminal's job control, so behind "&" or after Ctrl-Z it
// read every line the user typed to the shell (a sudo password included).
// Now the terminal is relayed by egressd, which stays in the user's job:
// from the background nothing is read for the program, the shell gets the
// line, and once "fg" brings egressd back the next line reaches the
// program.
func TestRunBackgroundProgramCannotReadWhatTheUserTypesToTheShell(t *testing.T) {
	e := newSandboxEnv(t)
	master, slave := openPTY(t)
	var shown lockedBuffer
	go io.Copy(&shown, master)
	var quoted []string
	for _, a := range e.command(`echo ready; read x; echo "program:$x"`).Args {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	// The shell reads nothing until the test has typed its line (it waits
	// on a FIFO first), so a program that can read the terminal from the
	// background takes the line before the shell asks for it.
	turn := filepath.Join(t.TempDir(), "turn")
	if err := unix.Mkfifo(turn, 0o600); err != nil {
		t.Fatal(err)
	}
	shell := exec.Command("/bin/bash", "--norc", "-m", "-c", strings.Join(quoted, " ")+` &
read go <`+turn+`; read line; echo "shell:$line"; fg %1 >/dev/null; echo "egressd:$?"`)
	shell.Stdin, shell.Stdout, shell.Stderr = slave, slave, slave
	shell.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := shell.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- shell.Wait() }()
	ended := false
	t.Cleanup(func() {
		if !ended {
			syscall.Kill(-shell.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	waitFor(t, &shown, `ready`)
	io.WriteString(master, "typed-to-the-shell\n")
	if err := os.WriteFile(turn, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &shown, `shell:typed-to-the-shell`)
	io.WriteString(master, "typed-to-the-program\n")
	waitFor(t, &shown, `egressd:0`)
	<-done
	ended = true
	out := shown.String()
	if strings.Contains(out, "program:typed-to-the-shell") || !strings.Contains(out, "program:typed-to-the-program") {
		t.Fatalf("the background program read the shell's line, or the foreground one missed its own:\n%s", out)
	}
}

// TestRunProgramCannotLeaveTheTerminalInAnotherMode is issue 19's fifth
// attacker, finding 8: the escape sequences a program wrote (alternate
// screen, hidden cursor, mouse tracking, application cursor keys) left the
// user's terminal emulator in those modes after it exited. The relay
// shows them as text instead; lines pass unchanged.
func TestRunProgramCannotLeaveTheTerminalInAnotherMode(t *testing.T) {
	e := newSandboxEnv(t)
	master, slave := openPTY(t)
	var shown bytes.Buffer
	drained := make(chan struct{})
	go func() { io.Copy(&shown, master); close(drained) }()
	cmd := e.command(`printf 'line one\n\033[?1049h\033[?25l\033[?1000h\033[?1h\033]52;c;c2VjcmV0\007done\n'`)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	err := cmd.Run()
	slave.Close()
	<-drained
	out := shown.String()
	if err != nil || strings.Contains(out, "\x1b[?") || strings.Contains(out, "\x1b]52") ||
		!strings.Contains(out, `line one`) || !strings.Contains(out, `\x1b[?1049h\x1b[?25l\x1b[?1000h\x1b[?1h\x1b]52;c;c2VjcmV0\x07done`) {
		t.Fatalf("egressd: %v; the program's escape sequences reached the terminal, or its text did not:\n%q", err, out)
	}
}
