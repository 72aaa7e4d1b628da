package sandbox

import (
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

// initSignals are the signals the init acts on. The kernel delivers to a
// namespace's pid 1 only the signals it has a handler for, and the Go
// runtime installs one for nearly every signal, with "crash" (SIGQUIT:
// a goroutine dump and exit 2) or "exit" as the default. So the init
// takes every catchable signal: SIGCHLD and the three it forwards on
// their own channels, everything else on a channel it drains and drops.
// A flood of dropped signals cannot fill the channels that matter, and
// SIGCHLD needs one slot: the reaper collects every exited child at once.
type initSignals struct {
	child   chan os.Signal // SIGCHLD
	forward chan os.Signal // SIGINT, SIGTERM, SIGHUP: passed to the target
}

func catchSignals() initSignals {
	dropped := make(chan os.Signal, 16)
	signal.Notify(dropped) // every signal; the two below are also here, and dropped here
	go func() {
		for range dropped {
		}
	}()
	s := initSignals{child: make(chan os.Signal, 1), forward: make(chan os.Signal, 8)}
	signal.Notify(s.child, unix.SIGCHLD)
	signal.Notify(s.forward, unix.SIGINT, unix.SIGTERM, unix.SIGHUP)
	return s
}

// next waits for a signal to act on.
func (s initSignals) next() os.Signal {
	select {
	case sig := <-s.child:
		return sig
	case sig := <-s.forward:
		return sig
	}
}
