package sandbox

import (
	"os"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// restrictFilesystem adds Landlock as a second layer under the mount
// namespace: even if a mount were undone, the process tree may read and
// execute only the system folders, /etc, /proc and the integration's own
// folders, and write only its HOME, /tmp and state folder. It runs after the
// pivot, on the paths the sandbox sees. BestEffort applies what this
// kernel's Landlock ABI supports, and nothing on a kernel without it: the
// namespaces remain the first layer.
//
// The ruleset binds the calling thread only, which the caller has locked
// and which forks the target (the target inherits it), as the capability
// drop and the seccomp filter do. landlock.RestrictPaths would bind every
// thread of the init by signalling each one with a realtime signal and
// waiting for it, for ever: while the launcher's uid has no pending-signal
// quota left, the kernel refuses those signals and the run never started.
func restrictFilesystem(spec Spec) error {
	ro := []string{"/usr", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/dev"}
	var roFiles []string // a program bound alone
	for _, p := range spec.ReadOnly {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			roFiles = append(roFiles, p)
		} else {
			ro = append(ro, p)
		}
	}
	// The filesystem rights alone, as RestrictPaths takes them: V7's network
	// and scope rights would refuse every TCP connect, the proxy's included.
	fsOnly := landlock.Config{HandledAccessFS: landlock.V7.HandledAccessFS}
	fd, flags, err := fsOnly.BestEffort().NewRulesetFD(
		landlock.RODirs(ro...).IgnoreIfMissing(),
		landlock.ROFiles(roFiles...),
		landlock.RWDirs("/tmp", Home, StateDir),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full").IgnoreIfMissing(),
	)
	if err != nil || fd < 0 { // fd < 0: this kernel has no Landlock
		return err
	}
	defer unix.Close(fd)
	// no_new_privs, which landlock_restrict_self requires, is already set on
	// this thread (dropPrivileges).
	return llsyscall.LandlockRestrictSelf(fd, flags)
}
