package selftest

import (
	"context"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// nNull is the N_NULL line discipline: a terminal set to it shows nothing.
const nNull = 27

// probeTerminal does to its standard input what leaves a user's terminal
// dead after egressd exits: the N_NULL line discipline, output stopped,
// echo off, a 1x1 window. The outer half lends a terminal of its own as
// that input and judges by what became of it.
func probeTerminal(_ context.Context, c *Config) (string, string) {
	if !c.TerminalLent {
		return skipped("egressd had no terminal to lend; the user's own is never touched")
	}
	t, err := unix.IoctlGetTermios(0, unix.TCGETS)
	if err != nil {
		return closed("the lent terminal reached the program as a pipe: egressd relays it (%s)", short(err))
	}
	var done, refused []string
	try := func(what string, err error) {
		if err != nil {
			refused = append(refused, what+": "+short(err))
		} else {
			done = append(done, what)
		}
	}
	t.Lflag &^= unix.ECHO
	try("echo off", unix.IoctlSetTermios(0, unix.TCSETS, t))
	try("1x1 window", unix.IoctlSetWinsize(0, unix.TIOCSWINSZ, &unix.Winsize{Row: 1, Col: 1}))
	try("output stopped", unix.IoctlSetInt(0, unix.TCXONC, unix.TCOOFF))
	try("N_NULL line discipline", unix.IoctlSetPointerInt(0, unix.TIOCSETD, nNull))
	if len(done) > 0 {
		return opened("changed its terminal: %s", strings.Join(done, ", "))
	}
	return closed("%s", strings.Join(refused, "; "))
}

// lentTerminal is a pseudo-terminal the outer half puts on its own
// standard input while the battery runs, as a user's terminal would be.
type lentTerminal struct {
	master, slave *os.File
	savedStdin    int
	before        unix.Termios
	size          unix.Winsize
}

// LendTerminal puts a fresh pseudo-terminal on this process's standard
// input until Close, so the terminal probe attacks it and not the user's.
func (b *Beacons) LendTerminal() error {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	lt := &lentTerminal{master: m, savedStdin: -1}
	fail := func(err error) error { lt.close(); return fmt.Errorf("lend a terminal: %w", err) }
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		return fail(err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		return fail(err)
	}
	if lt.slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0); err != nil {
		return fail(err)
	}
	s := int(lt.slave.Fd())
	t, err := unix.IoctlGetTermios(s, unix.TCGETS)
	if err != nil {
		return fail(err)
	}
	lt.before = *t
	unix.IoctlSetWinsize(s, unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80})
	w, _ := unix.IoctlGetWinsize(s, unix.TIOCGWINSZ)
	lt.size = *w
	if lt.savedStdin, err = unix.FcntlInt(0, unix.F_DUPFD_CLOEXEC, 3); err != nil {
		return fail(err)
	}
	if err := unix.Dup3(s, 0, 0); err != nil {
		return fail(err)
	}
	b.tty = lt
	b.Config.TerminalLent = true
	return nil
}

// ReturnStdin gives this process its own standard input back.
func (b *Beacons) ReturnStdin() {
	if b.tty != nil && b.tty.savedStdin >= 0 {
		unix.Dup3(b.tty.savedStdin, 0, 0)
		unix.Close(b.tty.savedStdin)
		b.tty.savedStdin = -1
	}
}

// changes lists what became of the lent terminal.
func (lt *lentTerminal) changes() []string {
	s := int(lt.slave.Fd())
	var out []string
	if d, err := unix.IoctlGetInt(s, unix.TIOCGETD); err != nil || d != 0 {
		out = append(out, fmt.Sprintf("line discipline %d", d))
	}
	if t, err := unix.IoctlGetTermios(s, unix.TCGETS); err != nil || t.Lflag != lt.before.Lflag || t.Iflag != lt.before.Iflag || t.Oflag != lt.before.Oflag {
		out = append(out, "modes changed (echo)")
	}
	if w, err := unix.IoctlGetWinsize(s, unix.TIOCGWINSZ); err != nil || *w != lt.size {
		out = append(out, "window resized")
	}
	if !lt.outputFlows() {
		out = append(out, "output stopped")
	}
	return out
}

// outputFlows writes one byte to the terminal and sees it arrive.
func (lt *lentTerminal) outputFlows() bool {
	go lt.slave.Write([]byte("."))
	fds := []unix.PollFd{{Fd: int32(lt.master.Fd()), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 300)
	return err == nil && n == 1
}

func (lt *lentTerminal) close() {
	if lt.slave != nil {
		lt.slave.Close()
	}
	lt.master.Close() // a write blocked on stopped output ends here
}
