package sandbox

import (
	"os"

	"github.com/landlock-lsm/go-landlock/landlock"
)

// restrictFilesystem adds Landlock as a second layer under the mount
// namespace: even if a mount were undone, the process tree may read and
// execute only the system folders, /etc, /proc and the integration's own
// folders, and write only its HOME, /tmp and state folder. It runs after the
// pivot, on the paths the sandbox sees. BestEffort applies what this
// kernel's Landlock ABI supports, and nothing on a kernel without it: the
// namespaces remain the first layer.
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
	return landlock.V7.BestEffort().RestrictPaths(
		landlock.RODirs(ro...).IgnoreIfMissing(),
		landlock.ROFiles(roFiles...),
		landlock.RWDirs("/tmp", Home, StateDir),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full").IgnoreIfMissing(),
	)
}
