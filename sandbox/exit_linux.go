package sandbox

import (
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// exitReport is what the supervisor learns about how the sandbox ended.
type exitReport struct {
	gone      chan struct{} // closed once the init has exited
	reported  atomic.Bool   // the init sent the target's status before exiting
	escalated atomic.Bool   // Stop's grace ran out and the sandbox was killed
	breach    atomic.Pointer[string]
}

func newExitReport() exitReport { return exitReport{gone: make(chan struct{})} }

// readExit reads the init's last message, which it sends just before it
// exits with the target's status. The init has exited, so the read does not
// block: it finds the message or the closed socket.
func (sb *Sandbox) readExit() {
	m, fds, err := sb.ctl.recv()
	for _, fd := range fds {
		unix.Close(fd)
	}
	if err == nil && m.Exited != nil {
		sb.exit.reported.Store(true)
		if m.Breach != "" {
			sb.exit.breach.Store(&m.Breach)
		}
	}
}

// Breach is, after Wait, the bound the init killed the sandbox for
// (socketWatch), or "".
func (sb *Sandbox) Breach() string {
	if p := sb.exit.breach.Load(); p != nil {
		return *p
	}
	return ""
}

// InitDied reports, after Wait, that the init itself died (killed, or
// crashed) rather than report the target's exit: the status Wait returned is
// the init's own, and the target was killed with it.
func (sb *Sandbox) InitDied() bool { return !sb.exit.reported.Load() }

// Escalated reports that Stop killed the sandbox after its grace period.
func (sb *Sandbox) Escalated() bool { return sb.exit.escalated.Load() }

// Stop forwards sig to the target and gives it grace to exit; after that,
// the whole sandbox is killed, as systemd and container runtimes do, so a
// program that ignores SIGTERM cannot keep egressd up.
func (sb *Sandbox) Stop(sig os.Signal, grace time.Duration) {
	sb.Signal(sig)
	go func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-sb.exit.gone:
			// The program is gone; its last output may wait on a peer
			// that no longer reads, which grace bounds too.
			select {
			case <-sb.outputDrained:
			case <-t.C:
				sb.killOnce.Do(func() { close(sb.killed) })
			}
		case <-t.C:
			sb.exit.escalated.Store(true)
			sb.Kill()
		}
	}()
}
