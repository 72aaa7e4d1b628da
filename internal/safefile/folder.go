package safefile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// MakeFolder makes the folder path (mode 0700) when it is missing and
// opens it for reading, never following a symlink at its last name. It is
// for the folders egressd makes in the state folder (STATE/audit,
// STATE/sandbox, STATE/sandbox-images): the state folder may belong to the
// service user, who can plant a link there to a folder of root's, and root
// would make files in it and chown them to a sandbox uid. The path up to
// the last name is the operator's and is followed. The folder is made and
// opened relative to a descriptor of its parent, so a name swapped between
// the two steps is refused too; callers work relative to the returned
// descriptor (the *at system calls), not through the name again.
func MakeFolder(path string) (*os.File, error) {
	parentPath, name := filepath.Dir(path), filepath.Base(path)
	if err := os.MkdirAll(parentPath, 0o700); err != nil {
		return nil, err
	}
	parent, err := unix.Open(parentPath, parentFlags, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: parentPath, Err: err}
	}
	defer unix.Close(parent)
	if err := unix.Mkdirat(parent, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, &os.PathError{Op: "mkdir", Path: path, Err: err}
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return nil, fmt.Errorf("%s is not a folder (a symlink or another file); egressd does not follow it: remove it, and egressd makes the folder", path)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	dir := os.NewFile(uintptr(fd), path)
	if err := ownFolder(dir); err != nil {
		dir.Close()
		return nil, err
	}
	return dir, nil
}

// ownFolder refuses a folder another user owns or may write: its owner
// (the state folder's owner can make STATE/sandbox before root's first
// run) could swap the entries egressd makes in it for links between two
// of egressd's steps.
func ownFolder(dir *os.File) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(dir.Fd()), &st); err != nil {
		return &os.PathError{Op: "stat", Path: dir.Name(), Err: err}
	}
	if euid := os.Geteuid(); int(st.Uid) != euid || st.Mode&0o022 != 0 {
		return fmt.Errorf("%s is owned by uid %d with mode %#o; egressd (uid %d) uses only a folder of its own that no one else may write there: remove it, and egressd makes the folder", dir.Name(), st.Uid, st.Mode&0o7777, euid)
	}
	return nil
}
