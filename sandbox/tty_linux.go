package sandbox

import (
	"errors"

	"golang.org/x/sys/unix"
)

// nTTY is the normal line discipline (N_TTY in linux/tty.h).
const nTTY = 0

// Terminal is the launcher's terminal as it was before the program ran. The
// program shares it (stdin, stdout and stderr pass through) and can change
// its line discipline (TIOCSETD n_null leaves it dead), stop its output
// (TCXONC), turn echo off or resize it; Restore puts it back.
type Terminal struct {
	fd      int
	termios *unix.Termios
	winsize *unix.Winsize
	ldisc   int
}

// SaveTerminal saves the state of the first of stdin, stdout and stderr
// that is a terminal, or returns nil when none is.
func SaveTerminal() *Terminal {
	for fd := 0; fd <= 2; fd++ {
		termios, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err != nil {
			continue
		}
		t := &Terminal{fd: fd, termios: termios, ldisc: nTTY}
		if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
			t.winsize = ws
		}
		if ld, err := unix.IoctlGetInt(fd, unix.TIOCGETD); err == nil {
			t.ldisc = ld
		}
		return t
	}
	return nil
}

// Restore puts the terminal back: line discipline first (the mode calls go
// through it), then output flow, modes and window size. It is safe to call
// more than once, and on a nil Terminal.
func (t *Terminal) Restore() error {
	if t == nil {
		return nil
	}
	var errs []error
	if ld, err := unix.IoctlGetInt(t.fd, unix.TIOCGETD); err != nil || ld != t.ldisc {
		errs = append(errs, unix.IoctlSetPointerInt(t.fd, unix.TIOCSETD, t.ldisc))
	}
	errs = append(errs, unix.IoctlSetInt(t.fd, unix.TCXONC, unix.TCOON))
	errs = append(errs, unix.IoctlSetTermios(t.fd, unix.TCSETS, t.termios))
	if t.winsize != nil {
		errs = append(errs, unix.IoctlSetWinsize(t.fd, unix.TIOCSWINSZ, t.winsize))
	}
	return errors.Join(errs...)
}
