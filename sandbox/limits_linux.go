package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
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
		name       string
		resource   int
		soft, hard uint64
	}{
		{"RLIMIT_NPROC", unix.RLIMIT_NPROC, uint64(l.Processes), uint64(l.Processes)},
		{"RLIMIT_NOFILE", unix.RLIMIT_NOFILE, uint64(l.OpenFiles), uint64(l.OpenFiles)},
		{"RLIMIT_DATA", unix.RLIMIT_DATA, uint64(l.MemoryMB) * mb, uint64(l.MemoryMB) * mb},
		{"RLIMIT_FSIZE", unix.RLIMIT_FSIZE, uint64(l.FileSizeMB) * mb, uint64(l.FileSizeMB) * mb},
		// 1, not 0: with a pipe core_pattern (systemd-coredump, apport)
		// the kernel ignores RLIMIT_CORE, except that 1 means "no core"
		// (fs/coredump.c, its guard against a crashing helper), and a
		// core file needs at least a page. With 0 a crash started the
		// host's helper as root with the program's memory. The program
		// cannot lower it back to 0: see coreLimitRules.
		{"RLIMIT_CORE", unix.RLIMIT_CORE, CoreLimit, CoreLimit},
		{"RLIMIT_SIGPENDING", unix.RLIMIT_SIGPENDING, PendingSignals, PendingSignals},
		{"RLIMIT_STACK", unix.RLIMIT_STACK, StackMB * mb, StackHardMB * mb},
		// No locked memory: a SysV segment's lock (SHM_LOCK, also refused
		// by seccomp) is charged to the launcher's uid, and mlock needs none.
		{"RLIMIT_MEMLOCK", unix.RLIMIT_MEMLOCK, 0, 0},
		{"RLIMIT_NICE", unix.RLIMIT_NICE, 0, 0},
		{"RLIMIT_RTPRIO", unix.RLIMIT_RTPRIO, 0, 0},
	} {
		// A launcher's hard limit below the bound stays: lower is
		// stricter, and raising it needs a capability the init lacks.
		var launcher syscall.Rlimit
		if err := syscall.Getrlimit(r.resource, &launcher); err == nil && launcher.Max < r.hard {
			r.hard = launcher.Max
			r.soft = min(r.soft, r.hard)
		}
		// syscall.Setrlimit, not unix's: for RLIMIT_NOFILE it also stops
		// the Go runtime from restoring the launcher's soft limit in the
		// child it forks.
		if err := syscall.Setrlimit(r.resource, &syscall.Rlimit{Cur: r.soft, Max: r.hard}); err != nil {
			return fmt.Errorf("%s=%d/%d: %w", r.name, r.soft, r.hard, err)
		}
	}
	return nil
}

// userNamespaceLimits are the per-user limits the init writes in the
// sandbox's user namespace before any capability is dropped. The kernel
// checks the sandbox's count against these, and the launcher's against the
// host's: no nested namespace, and no more than a small share of inotify
// and fanotify.
var userNamespaceLimits = []struct {
	name  string
	value int
}{
	{"max_user_namespaces", 0},
	{"max_inotify_instances", InotifyInstances},
	{"max_inotify_watches", InotifyWatches},
	{"max_fanotify_groups", FanotifyGroups},
	{"max_fanotify_marks", FanotifyMarks},
}

// limitUserNamespace sets userNamespaceLimits. A file this kernel lacks
// means it has no such object to count (no inotify, or no unprivileged
// fanotify), except max_user_namespaces, which it must have.
func limitUserNamespace() error {
	for _, l := range userNamespaceLimits {
		err := writeFile("/proc/sys/user/"+l.name, strconv.Itoa(l.value))
		if errors.Is(err, os.ErrNotExist) && l.name != "max_user_namespaces" {
			continue
		}
		if err != nil {
			return fmt.Errorf("user.%s=%d: %w", l.name, l.value, err)
		}
	}
	return nil
}
