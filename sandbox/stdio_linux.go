package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// checkStdio refuses a folder as stdin, stdout or stderr. The program gets
// these three descriptors as they are, and one that is a folder is a door
// into the host's tree: "/proc/self/fd/0/.." walks the host past the mount
// namespace, and Landlock does not cover unix connect or every path walk.
// Pipes, sockets, terminals and plain files lead nowhere.
func checkStdio() error {
	for fd, name := range []string{"stdin", "stdout", "stderr"} {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			continue // closed: nothing is passed
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return fmt.Errorf("sandbox: %s is a folder, which would give the program a way into the host's filesystem; give egressd a pipe, a file or a terminal", name)
		}
	}
	return nil
}
