// Package safefile reads files that someone other than the operator may
// control (manifests, the config, the folders that hold them) without
// letting the file's type stall or surprise the reader. A named pipe opened
// the ordinary way blocks until a writer appears, which froze "check" and
// every reload; a device can stream without end. Here every open is
// non-blocking, every file is checked with fstat after symlinks resolve,
// and reads are bounded.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// ReadRegular returns the contents of path, which must resolve to a
// regular file of at most max bytes. Errors read "path: message".
func ReadRegular(path string, max int64) ([]byte, error) {
	// Refuse a device or a pipe before opening it (opening some devices
	// acts on them); the fstat below covers a swap between look and open.
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: is %s, not a regular file", path, kind(st.Mode()))
	}
	f, err := open(path, 0)
	if err != nil {
		return nil, err
	}
	return readOpened(f, path, max)
}

// readOpened reads the file f opened at path, at most max bytes, once its
// descriptor shows a regular file (covering a swap between look and open),
// and closes it.
func readOpened(f *os.File, path string, max int64) ([]byte, error) {
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: is %s, not a regular file", path, kind(st.Mode()))
	}
	if err := onPseudoFS(f, path); err != nil {
		return nil, err
	}
	return readAll(f, path, max)
}

// readAll reads the open regular file f, at most max bytes.
func readAll(f *os.File, path string, max int64) ([]byte, error) {
	if st, err := f.Stat(); err == nil && st.Size() > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(data)) > max { // it grew while being read
		return nil, fmt.Errorf("%s: larger than %d bytes", path, max)
	}
	return data, nil
}

// OpenRegular opens path, which must resolve to a regular file, for a
// streaming read of any length (an audit log): never blocking on a named
// pipe, never opening a device. Errors read "path: message".
func OpenRegular(path string) (*os.File, error) {
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: is %s, not a regular file", path, kind(st.Mode()))
	}
	f, err := open(path, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: is %s, not a regular file", path, kind(st.Mode()))
	}
	if err := onPseudoFS(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadDir lists the folder path, which must resolve to a folder, in name
// order.
func ReadDir(path string) ([]fs.DirEntry, error) {
	f, err := open(path, unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// open opens path read-only without blocking and without taking a
// controlling terminal. O_DIRECTORY turns a non-folder into ENOTDIR.
func open(path string, flags int) (*os.File, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC|flags, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return os.NewFile(uintptr(fd), path), nil
	}
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "not a regular file (" + m.Type().String() + ")"
}

// ReadRegularNoFollow is ReadRegular for a file in a folder another user
// may write (version memory in the service user's state folder): a symlink
// in its place is refused, not followed, so a process running as root
// never reads a file the folder's owner pointed it at.
func ReadRegularNoFollow(path string, max int64) ([]byte, error) {
	if st, err := os.Lstat(path); err == nil && !st.Mode().IsRegular() && st.Mode()&fs.ModeSymlink == 0 {
		return nil, fmt.Errorf("%s: is %s, not a regular file", path, kind(st.Mode()))
	}
	f, err := open(path, unix.O_NOFOLLOW)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s: is a symlink, not a regular file; egressd does not follow it here: remove it", path)
	}
	if err != nil {
		return nil, err
	}
	// No check of hard links here: reading one is harmless (protected
	// hardlinks keep others from linking files they cannot read), and
	// backups that hard-link would otherwise stop version memory.
	return readOpened(f, path, max)
}

// OpenPrivate opens path for reading and writing, creating it with mode
// 0600, in a folder another user may write (the service user's state
// folder, a run's audit folder). It never follows a symlink, never blocks
// on a pipe, and refuses anything but a regular file with a single link:
// a process running as root that then writes, chowns or chmods the file
// (through the descriptor, never by path) acts on its own file, not on one
// the folder's owner planted a link to. flags adds open flags (O_APPEND).
func OpenPrivate(path string, flags int) (*os.File, error) {
	// Refuse a device before opening it (opening some acts on them); the
	// fstat below covers a swap between look and open.
	if st, err := os.Lstat(path); err == nil && !st.Mode().IsRegular() && st.Mode()&fs.ModeSymlink == 0 {
		return nil, fmt.Errorf("%s: is %s, not a regular file: remove it", path, kind(st.Mode()))
	}
	for {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC|flags, 0o600)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ELOOP {
			return nil, fmt.Errorf("%s: is a symlink, not a regular file; egressd does not follow it here: remove it", path)
		}
		if err == unix.ENXIO || err == unix.EISDIR {
			return nil, fmt.Errorf("%s: not a regular file: remove it", path)
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		f := os.NewFile(uintptr(fd), path)
		if _, err := checkPrivate(f, path); err != nil {
			f.Close()
			return nil, err
		}
		if err := unix.SetNonblock(fd, false); err != nil {
			f.Close()
			return nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return f, nil
	}
}

// checkPrivate checks, on the open descriptor, that f is a regular file
// with one link: a hard link to another file is that file.
func checkPrivate(f *os.File, path string) (fs.FileInfo, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: is %s, not a regular file: remove it", path, kind(st.Mode()))
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
		return nil, fmt.Errorf("%s: has %d hard links, so it is not a regular file egressd owns alone: remove it", path, sys.Nlink)
	}
	return st, nil
}

// ReadRegularAt is ReadRegularNoFollow for the entry name of the folder
// held open as dir (an O_PATH descriptor is enough): the folder is not
// looked up by name again, and a symlink in name's place is refused. path
// names the file in errors.
func ReadRegularAt(dir *os.File, name, path string, max int64) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return nil, fmt.Errorf("%s: is a symlink, not a regular file; egressd does not follow it here: remove it", path)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s: is %s, not a regular file", path, kind(modeType(uint32(st.Mode))))
	}
	var fd int
	var err error
	for {
		fd, err = unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != unix.EINTR {
			break
		}
	}
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s: is a symlink, not a regular file; egressd does not follow it here: remove it", path)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: is %s, not a regular file", path, kind(info.Mode()))
	}
	if err := onPseudoFS(f, path); err != nil {
		return nil, err
	}
	return readAll(f, path, max)
}

// modeType is the fs.FileMode type bits of a stat mode.
func modeType(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}
