package sandbox

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// setRlimits lowers the soft and hard rlimits of the whole init process,
// which the target inherits at fork. It runs after the init has made its
// threads and opened its descriptors, and the init needs little of either
// afterwards. A limit that cannot be set is an error: the sandbox does not
// start without its bounds.
func setRlimits(l Limits) error {
	if err := l.check(); err != nil {
		return err
	}
	const mb = 1 << 20
	for _, r := range []struct {
		name     string
		resource int
		value    uint64
	}{
		{"RLIMIT_NPROC", unix.RLIMIT_NPROC, uint64(l.Processes)},
		{"RLIMIT_NOFILE", unix.RLIMIT_NOFILE, uint64(l.OpenFiles)},
		{"RLIMIT_DATA", unix.RLIMIT_DATA, uint64(l.MemoryMB) * mb},
		{"RLIMIT_FSIZE", unix.RLIMIT_FSIZE, uint64(l.FileSizeMB) * mb},
		{"RLIMIT_CORE", unix.RLIMIT_CORE, 0},
	} {
		// syscall.Setrlimit, not unix's: for RLIMIT_NOFILE it also stops
		// the Go runtime from restoring the launcher's soft limit in the
		// child it forks.
		if err := syscall.Setrlimit(r.resource, &syscall.Rlimit{Cur: r.value, Max: r.value}); err != nil {
			return fmt.Errorf("%s=%d: %w", r.name, r.value, err)
		}
	}
	return nil
}
