package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/sandbox"
)

// exitMessage says how the sandbox ended, for the audit log's stop event:
// the program's status, or plainly that egressd killed it after its grace
// period, or that the sandbox's init itself died (and the status is its own).
func exitMessage(sb *sandbox.Sandbox, code int, grace time.Duration) string {
	switch {
	case sb.Escalated():
		return fmt.Sprintf("killed: still running %s after the forwarded signal (timeouts.stop_grace); exit status %d", grace, code)
	case sb.InitDied():
		return fmt.Sprintf("the sandbox's init died (exit status %d); the program was killed with it", code)
	case sb.Breach() != "":
		return fmt.Sprintf("%s; exit status %d", sb.Breach(), code)
	}
	return fmt.Sprintf("exit status %d", code)
}

// maintainAudit rolls run's audit file at audit.max_size_mb and reopens it
// on SIGUSR1 (logrotate's postrotate), as serve does, and calls each
// second once a second, until stop is called.
func (r *runSetup) maintainAudit(stderr io.Writer, each func()) (stop func()) {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	roll := time.NewTicker(time.Second)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-roll.C:
				each()
				if err := r.log.RollIfFull(); err != nil {
					fmt.Fprintln(stderr, "egressd: audit rotation:", err)
				}
			case <-usr1:
				if err := r.sink.reopen(r.log); err != nil {
					fmt.Fprintln(stderr, "egressd: audit reopen:", err)
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(usr1)
		roll.Stop()
		close(done)
		<-finished
	}
}

// reportState tidies the state folder after the run (no setuid file stays)
// and records what it holds; over the bound, the next run will not start,
// and egressd says so now.
func (r *runSetup) reportState(stderr io.Writer) {
	if r.opts.StateMount != nil {
		return // root: the state is an image of state_mb, bounded by the kernel
	}
	p := r.policy
	use, err := sandbox.TidyStateFolder(r.spec.StateDir, -1, -1)
	if err != nil {
		fmt.Fprintln(stderr, "egressd run: state folder:", err)
		r.log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "state", Err: audit.Cap(err.Error(), 1000)}))
		return
	}
	msg := fmt.Sprintf("state folder holds %d KB in %d files", use.Bytes>>10, use.Files)
	if err := r.cfg.Sandbox.CheckState(use); err != nil {
		msg = err.Error()
		fmt.Fprintln(stderr, "egressd: warning:", msg)
	}
	r.log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "state", Msg: msg}))
}

// limitsMessage states the bounds in force, for the audit log at start.
func limitsMessage(l sandbox.Limits, stateImage bool) string {
	state := fmt.Sprintf("state folder %d MB (checked)", l.StateMB)
	if stateImage {
		state = fmt.Sprintf("state image %d MB", l.StateMB)
	}
	return fmt.Sprintf("processes %d, open files %d per process, memory %d MB per process (RLIMIT_DATA), file size %d MB, /tmp %d MB, HOME %d MB, %d inodes each, %s",
		l.Processes, l.OpenFiles, l.MemoryMB, l.FileSizeMB, l.TmpMB, l.HomeMB, l.TmpfsInodes, state)
}

// kernelLimitsMessage states the fixed bounds on kernel objects the kernel
// counts per user, in a line of its own: audit messages stop at 256 bytes.
var kernelLimitsMessage = fmt.Sprintf("pending signals %d, inotify %d instances and %d watches, fanotify %d groups and %d marks, TCP buffers %s",
	sandbox.PendingSignals, sandbox.InotifyInstances, sandbox.InotifyWatches, sandbox.FanotifyGroups, sandbox.FanotifyMarks, sandbox.TCPBufferBound)

// networkLimitsMessage states the bounds on the sandbox's TCP connections
// and sockets, and on its pipes, in a line of its own.
func networkLimitsMessage(l sandbox.Limits) string {
	return fmt.Sprintf("TCP connections %d at once (more are refused), TCP sockets %d in use or %d queued (past either the sandbox is killed), pipes 64 KiB, MPTCP refused, "+
		"socket options %d KiB a socket, %d MB in all, TCP keys refused",
		l.TCPConnections(), l.TCPSockets(), l.TCPQueued(), sandbox.OptMemBytes>>10, l.SocketOptionMB())
}

// processLimitsMessage states the fixed bounds on each process's stack,
// locked memory, kernel pools and CPU share, in a third line.
func processLimitsMessage(allowSetsid bool) string {
	cpu := "one session (setsid refused)"
	if allowSetsid {
		cpu = "sessions allowed (a cgroup bounds the CPU)"
	}
	return fmt.Sprintf("stack %d MB (%d MB hard), no locked memory, no legacy AIO, nice %d, %s",
		sandbox.StackMB, sandbox.StackHardMB, sandbox.Nice, cpu)
}
