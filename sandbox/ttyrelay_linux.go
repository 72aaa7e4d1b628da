package sandbox

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// isTerminal says whether fd is a terminal: one that answers TCGETS.
func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}

// foregroundReader reads the user's terminal for the program only while
// egressd's job is in the foreground, as the shell's job control means it
// to be. egressd ignores SIGTTIN and SIGTTOU: a stopped egressd would stop
// the proxy under a program that keeps running, and a caught SIGTTIN would
// make the kernel restart the read forever. So a read from the background
// fails with EIO, and the relay waits until egressd's job is the
// foreground again before it reads. Nothing announces that: "fg" sends
// SIGCONT only to a stopped job (bash's start_job), so besides SIGCONT the
// relay looks at the terminal's foreground group four times a second, one
// ioctl each, while it is in the background. Writes to the terminal from
// the background go through (the kernel lets a job that ignores SIGTTOU
// write).
func foregroundReader(f *os.File) io.Reader {
	signal.Ignore(syscall.SIGTTIN, syscall.SIGTTOU)
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	return &ttyReader{f: f, cont: cont}
}

type ttyReader struct {
	f    *os.File
	cont chan os.Signal
}

func (t *ttyReader) Read(p []byte) (int, error) {
	for {
		n, err := t.f.Read(p)
		if err == nil || !errors.Is(err, syscall.EIO) || !inBackground(int(t.f.Fd())) {
			return n, err
		}
		t.waitForeground()
	}
}

func (t *ttyReader) waitForeground() {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for inBackground(int(t.f.Fd())) {
		select {
		case <-t.cont:
		case <-tick.C:
		}
	}
}

// inBackground says whether the terminal's foreground process group is
// another than egressd's: a read there is refused, not at an end.
func inBackground(fd int) bool {
	pg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	return err == nil && pg != unix.Getpgrp()
}
