package sandbox

import (
	"errors"

	"golang.org/x/sys/unix"
)

// A descriptor is a door: every fd, cwd and root of a process in the
// sandbox is a magic link in /proc, and ".." from one that points into the
// host's mount tree walks the host, past Landlock, which covers neither
// magic-link walks nor unix connect. Three layers keep those doors shut:
// the init closes every descriptor into the host tree once the root is
// built (closeSources), the init is not dumpable, so no process without
// CAP_SYS_PTRACE may open its /proc entries, and /proc is mounted with
// hidepid, so the target does not even see them.

// initBaseEnv is the init's whole environment. The Go runtime otherwise keeps
// its cgroup's CPU limit files open for the life of the process: two
// descriptors into the host's tree.
var initBaseEnv = []string{"GODEBUG=containermaxprocs=0"}

// makeUndumpable keeps the init's /proc/1/{fd,cwd,root,environ,mem} and
// its threads' from every process in the sandbox, which all share its uid.
// It also means no core dump of the init.
func makeUndumpable() error {
	return step("not dumpable", unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0))
}

// mountProc mounts the sandbox's own /proc with other processes hidden
// (hidepid=invisible, Linux 5.8; hidepid=2 before): a process sees only
// the processes it may ptrace, so the non-dumpable init is invisible.
func mountProc(root string) error {
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	err := mkdirMount(root, "/proc", "proc", flags, "hidepid=invisible")
	if errors.Is(err, unix.EINVAL) {
		err = mkdirMount(root, "/proc", "proc", flags, "hidepid=2")
	}
	return step("mount /proc", err)
}

// closeSources closes every bind source once the root is built: the O_PATH
// fds the init opened and the detached mounts the supervisor passed. Left
// open, each would be a way back into the host's tree.
func closeSources() {
	for p, s := range opened {
		unix.Close(s.fd)
		delete(opened, p)
	}
}
