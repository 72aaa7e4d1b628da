package sandbox

import (
	"errors"

	"golang.org/x/sys/unix"
)

// nTTY is the normal line discipline (N_TTY in linux/tty.h).
const nTTY = 0

// Terminal is the launcher's terminal as it was before the program ran. A
// sandboxed program never holds it (the sandbox relays a terminal through
// pipes, see passedAsIs), nor any other stdio of the launcher's, so there
// only the file status flags are saved (SaveStdioFlags), which is now a
// harmless second guard: restoring modes on a
// terminal nobody else touched would only stop a background egressd with
// SIGTTOU. Under --insecure-env-only the program shares it and can change
// its line discipline (TIOCSETD n_null leaves it dead), stop its output
// (TCXONC), turn echo off, resize it, or make it exclusive (TIOCEXCL: every
// further open(2) of it but root's fails with EBUSY). The seccomp filter
// refuses these calls; Restore puts everything back where no filter stood
// (--insecure-env-only). Whether or not they are terminals, fds 0, 1 and 2
// are open file descriptions shared with the user's shell: F_SETFL
// O_NONBLOCK from inside makes the shell's next read fail with EAGAIN, so
// their file status flags come back too.
type Terminal struct {
	fd      int // -1 when none of fds 0-2 is a terminal
	termios *unix.Termios
	winsize *unix.Winsize
	ldisc   int
	excl    int    // TIOCGEXCL: 1 when exclusive
	flags   [3]int // F_GETFL of fds 0-2; -1 when closed
}

// SaveStdioFlags saves the file status flags of stdin, stdout and stderr.
func SaveStdioFlags() *Terminal {
	t := &Terminal{fd: -1, ldisc: nTTY}
	for fd := 0; fd <= 2; fd++ {
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil {
			fl = -1
		}
		t.flags[fd] = fl
	}
	return t
}

// SaveTerminal saves the file status flags of stdin, stdout and stderr and
// the state of the first of them that is a terminal.
func SaveTerminal() *Terminal {
	t := SaveStdioFlags()
	for fd := 0; fd <= 2; fd++ {
		termios, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err != nil {
			continue
		}
		t.fd, t.termios = fd, termios
		if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
			t.winsize = ws
		}
		if ld, err := unix.IoctlGetInt(fd, unix.TIOCGETD); err == nil {
			t.ldisc = ld
		}
		if x, err := unix.IoctlGetInt(fd, unix.TIOCGEXCL); err == nil {
			t.excl = x
		}
		break
	}
	return t
}

// Restore puts the terminal back: line discipline first (the mode calls go
// through it), then exclusive mode, output flow, modes and window size. It is safe to call
// more than once, and on a nil Terminal.
func (t *Terminal) Restore() error {
	if t == nil {
		return nil
	}
	var errs []error
	for fd, fl := range t.flags {
		if fl >= 0 {
			if now, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil && now != fl {
				_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl)
				errs = append(errs, err)
			}
		}
	}
	if t.fd < 0 {
		return errors.Join(errs...)
	}
	if ld, err := unix.IoctlGetInt(t.fd, unix.TIOCGETD); err != nil || ld != t.ldisc {
		errs = append(errs, unix.IoctlSetPointerInt(t.fd, unix.TIOCSETD, t.ldisc))
	}
	if x, err := unix.IoctlGetInt(t.fd, unix.TIOCGEXCL); err != nil || x != t.excl {
		req := uint(unix.TIOCNXCL)
		if t.excl != 0 {
			req = unix.TIOCEXCL
		}
		errs = append(errs, unix.IoctlSetInt(t.fd, req, 0))
	}
	errs = append(errs, unix.IoctlSetInt(t.fd, unix.TCXONC, unix.TCOON))
	errs = append(errs, unix.IoctlSetTermios(t.fd, unix.TCSETS, t.termios))
	if t.winsize != nil {
		errs = append(errs, unix.IoctlSetWinsize(t.fd, unix.TIOCSWINSZ, t.winsize))
	}
	return errors.Join(errs...)
}
