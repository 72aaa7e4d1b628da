package sandbox

import (
	"fmt"
	"io"
	"os"

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

// stdioWriter is what the sandbox gets as stdout or stderr for egressd's
// own f: f itself, unless f is a regular file. A program handed a file
// descriptor could clear O_APPEND (fcntl), seek to 0 and rewrite or
// truncate (ftruncate needs only a writable descriptor, so no seccomp rule
// on F_SETFL would stop it) what the file held before it started: another
// service's log, or egressd's own lines. So it gets a pipe, and egressd
// writes what comes out of it into the file, at egressd's own offset (the
// end, for ">>"). exec.Cmd makes the pipe and its copy, and its Wait
// returns once the copy has drained, which it does when the sandbox's init
// dies: every holder of the pipe is in its pid namespace.
func stdioWriter(f *os.File) io.Writer {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
		return relayTo{f}
	}
	return f
}

// relayTo hides f's type from exec.Cmd, which would otherwise hand the
// descriptor itself to the child.
type relayTo struct{ f *os.File }

func (r relayTo) Write(p []byte) (int, error) { return r.f.Write(p) }
