package audit

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/egressd/egressd/internal/safefile"
	"golang.org/x/sys/unix"
)

// File is an audit log file: opened for appending, created 0600, and
// locked so that a second egressd process cannot interleave its own chain
// into it. Each process writes its own file; give every "egressd run" or
// "egressd serve" its own path.
type File struct {
	path    string
	maxSize int64
	f       *os.File
	size    int64
	tail    string // the hash of the last line found in the file at open
}

// OpenFile opens path for appending, creating it with mode 0600, and takes
// an exclusive lock on it. maxSize > 0 makes Full report when the file
// should be rolled over.
func OpenFile(path string, maxSize int64) (*File, error) {
	return openFile(path, maxSize, unix.O_APPEND)
}

// CreateFile is OpenFile for a file that must be new: it fails with an
// error matching fs.ErrExist when anything is at path already. A run's
// file of its own (egressd run's ID.PID.log) is created so: a PID repeats
// (PID 1 at every start of a container), and appending to an earlier run's
// file would put a second run in a file whose run claims it alone.
func CreateFile(path string, maxSize int64) (*File, error) {
	return openFile(path, maxSize, unix.O_APPEND|unix.O_EXCL)
}

func openFile(path string, maxSize int64, flags int) (*File, error) {
	// A named pipe would block the open, a device is no log, and a symlink
	// or hard link planted in a folder another user owns (a run's audit
	// folder under the service user's state) would have root append to the
	// file it points at: OpenPrivate refuses all of them, without blocking.
	f, err := safefile.OpenPrivate(path, flags)
	if err != nil {
		return nil, fmt.Errorf("audit log %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("audit log %s is in use by another egressd process; give each process its own file", path)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &File{path: path, maxSize: maxSize, f: f, size: st.Size(), tail: tailHash(path, st.Size())}, nil
}

// tailHash returns the hash of the last line already in the file at path
// ("none" when it is empty), so a new chain appended to it names the run
// before it: removing a whole run from between two others then breaks the
// link, which a keyed chain's genesis makes unforgeable. A last line that
// is not a chained line gives "unreadable".
func tailHash(path string, size int64) string {
	if size == 0 {
		return "none"
	}
	f, err := safefile.OpenRegular(path)
	if err != nil {
		return "unreadable"
	}
	defer f.Close()
	const window = 64 << 10
	off := max(0, size-window)
	buf := make([]byte, size-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return "unreadable"
	}
	line, ok := bytes.CutSuffix(buf, []byte("\n"))
	if !ok || len(line) < hashTail {
		return "unreadable"
	}
	tail := line[len(line)-hashTail:]
	if !bytes.HasPrefix(tail, []byte(`,"hash":"`)) || !bytes.HasSuffix(tail, []byte(`"}`)) {
		return "unreadable"
	}
	hash := string(tail[len(`,"hash":"`) : len(tail)-2])
	if _, err := hex.DecodeString(hash); err != nil {
		return "unreadable"
	}
	return hash
}

func (f *File) Write(p []byte) (int, error) {
	n, err := f.f.Write(p)
	f.size += int64(n)
	return n, err
}

// Full reports whether the file has reached its size limit.
func (f *File) Full() bool { return f.maxSize > 0 && f.size >= f.maxSize }

// Path returns the file's path.
func (f *File) Path() string { return f.path }

// Close syncs and closes the file.
func (f *File) Close() error {
	f.f.Sync()
	return f.f.Close()
}

// Reopen opens the path anew, for logrotate's convention: it renames the
// file and sends SIGUSR1, and egressd continues in a new file at the path.
// When the path still names the file already open (SIGUSR1 without a
// rename, or logrotate's copytruncate), opening it again would conflict
// with this process's own lock: the open file is shared instead, through a
// duplicate descriptor that holds the same lock, and its size is read anew.
func (f *File) Reopen() (*File, error) {
	same, err := f.pathIsOpenFile()
	if err != nil {
		return nil, err
	}
	if !same {
		return OpenFile(f.path, f.maxSize)
	}
	fd, err := unix.FcntlInt(f.f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("audit log %s: %w", f.path, err)
	}
	dup := os.NewFile(uintptr(fd), f.path)
	st, err := dup.Stat()
	if err != nil {
		dup.Close()
		return nil, err
	}
	return &File{path: f.path, maxSize: f.maxSize, f: dup, size: st.Size()}, nil
}

// pathIsOpenFile reports whether the path names the very file f has open.
// A missing path is not an error: logrotate renamed it and Reopen creates
// a new one.
func (f *File) pathIsOpenFile() (bool, error) {
	atPath, err := os.Stat(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	open, err := f.f.Stat()
	if err != nil {
		return false, err
	}
	return os.SameFile(atPath, open), nil
}

// Roll renames the file to PATH.YYYYMMDDTHHMMSS.NNNNNNNNNZ and opens a new
// one at the path, for rotation by size.
func (f *File) Roll(now time.Time) (*File, error) {
	old := f.path + "." + now.UTC().Format("20060102T150405.000000000Z")
	if err := os.Rename(f.path, old); err != nil {
		return nil, err
	}
	return OpenFile(f.path, f.maxSize)
}
