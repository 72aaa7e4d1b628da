//go:build linux

package bounded

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// shieldThread keeps the process's signals off the thread a read runs on,
// until restore. A thread stuck in a FUSE request sleeps killable: the
// kernel may still pick it for SIGTERM (it "wants" a signal it has not
// blocked), and a signal given to it is never handled, so egressd would
// ignore SIGTERM for as long as the read is stuck. Blocked here, the
// kernel gives each signal to another thread.
func shieldThread() (restore func()) {
	runtime.LockOSThread()
	var set, old unix.Sigset_t
	for _, s := range []unix.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGUSR1, unix.SIGQUIT} {
		set.Val[(s-1)/64] |= 1 << ((uint(s) - 1) % 64)
	}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		runtime.UnlockOSThread()
		return func() {}
	}
	return func() {
		unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
		runtime.UnlockOSThread()
	}
}
