package sandbox

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/egressd/egressd/internal/linejoin"
	"github.com/egressd/egressd/internal/termsafe"
	"golang.org/x/sys/unix"
)

// checkStdio refuses a folder as stdin, stdout or stderr: relayed or not,
// a launcher that hands egressd a folder has made a mistake worth saying.
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

// passedAsIs says whether the program may hold egressd's own descriptor
// fd: only when it is closed, which passes nothing. Stdio is always
// relayed through egressd's own pipes (stdio). Whatever the launcher
// hands egressd is an open file description shared with others, and
// holding it gives the program more than its bytes: a socket belongs to
// the host's network namespace (connect AF_UNSPEC, then anywhere past the
// proxy; interface-listing ioctls); a regular file can be rewritten (clear
// O_APPEND, seek, ftruncate) or reopened writable through /proc/self/fd; a
// device or terminal is the launcher's or the user's (job control, modes);
// a named FIFO is a host file a normal user's program could fchmod. Even an
// anonymous pipe: a normal user's program reopened /proc/self/fd/2
// read-only and took the lines another job wrote to the shared pipe before
// its real reader saw them, and F_SETPIPE_SZ left the launcher's pipe at 4
// KiB after exit.
func passedAsIs(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) != nil
}

// stdio is what the init gets as fds 0, 1 and 2, and the relays behind
// them. egressd copies a relayed stdin into a pipe, and a relayed stdout
// or stderr out of one, through its own duplicate of the descriptor: a
// write that fails with EPIPE there is an error, not the SIGPIPE Go raises
// for fds 1 and 2. The pipes' other ends stay in the sandbox's pid
// namespace, so they close when its init dies.
type stdio struct {
	files     [3]*os.File // for the init
	childEnds []*os.File  // the pipe ends the init gets, closed here once it has them
	ownEnds   []*os.File  // the relays' own ends, closed by the relays
	relays    []func()    // started once the init runs
	outputs   sync.WaitGroup
	fileMax   int64 // bytes a relay writes into a regular file
	joint     *linejoin.Joint
}

// newStdio relays each of fds 0-2 that passedAsIs refuses. A stdout and
// stderr that are the same file share one relay, in order, as 2>&1 does.
// A relay into a regular file writes at most fileMax of the program's bytes
// (the sandbox's RLIMIT_FSIZE, which egressd's own writes are not under;
// through the joint, each escaped quote adds 3 bytes, at most 3 for every
// 11 the program wrote); then it closes
// the pipe, and the program's next write fails as a write past the limit
// would.
//
// The relay into egressd's own stderr (fd 2's, or fd 1's when both are one
// file) writes through joint, if set: see Options.Stderr.
func newStdio(fileMax int64, joint *linejoin.Joint) (*stdio, error) {
	s := &stdio{files: [3]*os.File{os.Stdin, os.Stdout, os.Stderr}, fileMax: fileMax, joint: joint}
	if !passedAsIs(0) {
		if err := s.relayIn(); err != nil {
			s.closeAll()
			return nil, err
		}
	}
	for fd := 1; fd <= 2; fd++ {
		if fd == 2 && sameFile(1, 2) && s.files[1] != os.Stdout {
			s.files[2] = s.files[1]
			continue
		}
		if !passedAsIs(fd) {
			if err := s.relayOut(fd); err != nil {
				s.closeAll()
				return nil, err
			}
		}
	}
	return s, nil
}

// relayIn gives the init a pipe's read end for stdin; the copy ends at the
// source's EOF, which closes the pipe, or when the program no longer reads.
// Nothing waits for it: a socket that never sends EOF must not hold
// egressd once the program has exited.
func (s *stdio) relayIn() error {
	src, err := dupFile(0, "stdin")
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		src.Close()
		return fmt.Errorf("sandbox: stdin pipe: %w", err)
	}
	s.files[0], s.childEnds, s.ownEnds = r, append(s.childEnds, r), append(s.ownEnds, w, src)
	var in io.Reader = readerOnly{src}
	if isTerminal(0) {
		in = foregroundReader(src)
	}
	s.relays = append(s.relays, func() {
		go func() {
			io.Copy(writerOnly{w}, in)
			w.Close()
			src.Close()
		}()
	})
	return nil
}

// relayOut gives the init a pipe's write end for fd (1 or 2). Once the
// program's output ends, a stdout socket's sending side is shut down, so
// the peer sees EOF even where the launcher keeps a copy of it; not when it
// is also egressd's stderr, which egressd still writes to.
func (s *stdio) relayOut(fd int) error {
	dst, err := dupFile(fd, []string{1: "stdout", 2: "stderr"}[fd])
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		dst.Close()
		return fmt.Errorf("sandbox: stdio pipe: %w", err)
	}
	var st unix.Stat_t
	unix.Fstat(fd, &st)
	shut := fd == 1 && st.Mode&unix.S_IFMT == unix.S_IFSOCK && !sameFile(1, 2)
	s.files[fd], s.childEnds, s.ownEnds = w, append(s.childEnds, w), append(s.ownEnds, r, dst)
	s.outputs.Add(1)
	var out io.Writer = writerOnly{dst}
	shared := s.joint != nil && (fd == 2 || sameFile(1, 2)) // egressd's own lines go here too
	if shared {
		out = s.joint.Relayed(out)
	}
	var in io.Reader = readerOnly{r}
	var text *termsafe.TextWriter
	// Escaped on a terminal, and wherever egressd's own lines share the
	// stream, a file or a pipe included: a cursor move or a lone CR in the
	// program's bytes would paint over egressd's warning when the log is
	// read later (round 19).
	if isTerminal(fd) || shared {
		text = termsafe.Text(out)
		out = text
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		in = io.LimitReader(in, s.fileMax)
	}
	s.relays = append(s.relays, func() {
		go func() {
			defer s.outputs.Done()
			io.Copy(out, in)
			if text != nil {
				text.Flush()
			}
			r.Close() // the program's next write fails, as on a closed socket
			if shut {
				unix.Shutdown(int(dst.Fd()), unix.SHUT_WR)
			}
			dst.Close()
		}()
	})
	return nil
}

// started closes this process's copies of the init's pipe ends and starts
// the copies.
func (s *stdio) started() {
	for _, f := range s.childEnds {
		f.Close()
	}
	for _, relay := range s.relays {
		relay()
	}
}

// drained is closed once every relayed output has been written out.
func (s *stdio) drained() <-chan struct{} {
	c := make(chan struct{})
	go func() {
		s.outputs.Wait()
		close(c)
	}()
	return c
}

// closeAll undoes newStdio when the init never started.
func (s *stdio) closeAll() {
	for _, f := range append(s.childEnds, s.ownEnds...) {
		f.Close()
	}
}

func dupFile(fd int, name string) (*os.File, error) {
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, fmt.Errorf("sandbox: dup %s: %w", name, err)
	}
	return os.NewFile(uintptr(d), name), nil
}

// sameFile says whether fds a and b are the same file (device and inode).
func sameFile(a, b int) bool {
	var sa, sb unix.Stat_t
	return unix.Fstat(a, &sa) == nil && unix.Fstat(b, &sb) == nil && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// readerOnly and writerOnly hide the *os.File from io.Copy, whose fast
// paths (copy_file_range, splice, sendfile) would be tried on descriptors
// the launcher shares with others.
type readerOnly struct{ io.Reader }
type writerOnly struct{ io.Writer }
