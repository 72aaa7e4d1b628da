package main

import (
	"bytes"
	"io"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// cttyProbe is what the attacker's probe did with the terminal it was
// handed: take it as its controlling terminal (TIOCSCTTY, and by opening it
// again without O_NOCTTY, which makes a session leader's first terminal its
// controlling one), ignore its carrier (TIOCSSOFTCAR sets CLOCAL) and move
// its foreground group (TIOCSPGRP). exec: the program is the session
// leader egressd starts, as a program run directly is. tty_nr in /proc/self/stat is the
// controlling terminal, 0 for none.
const cttyProbe = `exec perl -e '
sub tty { open(my $s, "<", "/proc/self/stat") or return "?"; my @f = split / /, <$s>; return $f[6] }
ioctl(STDIN, 0x540E, 0) ? print "sctty: ok\n" : print "sctty: $!\n";
print "tty_nr after TIOCSCTTY: ", tty(), "\n";
open(my $again, "+<", "/proc/self/fd/0") or print "reopen: $!\n";
print "tty_nr after reopen: ", tty(), "\n";
my $one = pack("i", 1);
ioctl(STDIN, 0x541A, $one) ? print "softcar: ok\n" : print "softcar: $!\n";
my $pg = pack("i", getpgrp());
ioctl(STDIN, 0x5410, $pg) ? print "spgrp: ok\n" : print "spgrp: $!\n";
'`

// TestRunProgramCannotTakeTheTerminalItIsHanded is the attacker's
// repro-pty-ctty.sh: egressd run launched with no controlling terminal (a
// service, setsid) hands the program a terminal that is no session's; the
// program made it its controlling terminal (on a console that gave it the
// owner's KD* rights, and the kernel hung the terminal up when it exited,
// breaking the launcher's descriptor), set CLOCAL with TIOCSSOFTCAR and
// moved the terminal's foreground group. Every one is refused, the program
// never gets a controlling terminal, and the terminal's modes are as
// before.
func TestRunProgramCannotTakeTheTerminalItIsHanded(t *testing.T) {
	e := newSandboxEnv(t)
	master, slave := openPTY(t)
	sfd := int(slave.Fd())
	before, err := unix.IoctlGetTermios(sfd, unix.TCGETS)
	if err != nil || before.Cflag&unix.CLOCAL != 0 {
		t.Fatalf("fresh pty: %+v %v", before, err)
	}
	var shown bytes.Buffer
	drained := make(chan struct{})
	go func() { io.Copy(&shown, master); close(drained) }()
	cmd := e.command(cttyProbe)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no controlling terminal, as from a service
	runErr := cmd.Run()
	after, err := unix.IoctlGetTermios(sfd, unix.TCGETS)
	if err != nil {
		t.Fatalf("the terminal after the run: %v", err)
	}
	slave.Close()
	<-drained
	out := strings.ReplaceAll(shown.String(), "\r\n", "\n")
	if runErr != nil {
		t.Fatalf("egressd: %v\n%s", runErr, out)
	}
	for _, want := range []string{"sctty: Operation not permitted\n", "tty_nr after TIOCSCTTY: 0\n", "tty_nr after reopen: 0\n",
		"softcar: Operation not permitted\n", "spgrp: Operation not permitted\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the program's probe lacks %q:\n%s", want, out)
		}
	}
	if *after != *before {
		t.Errorf("termios after the run:\n%+v\nwant\n%+v", after, before)
	}
}
