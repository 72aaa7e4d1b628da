package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/egressd/egressd/internal/safefile"
	"github.com/egressd/egressd/internal/workdir"
	"golang.org/x/sys/unix"
)

// Host uids for root's sandboxes: one per integration, from
// [stateUIDBase, stateUIDBase+stateUIDSpan), owned by no real user.
const (
	stateUIDBase = 2_000_000_000
	stateUIDSpan = 1 << 24
)

// maxStateDepth bounds how deep TidyStateFolder descends into a tree the
// program built.
const maxStateDepth = 128

// ClaimStateFolder returns the integration's writable folder, PARENT/NAME
// (NAME from StateName), and the host uid its sandboxes run as: the
// caller's own, or, as root, the uid claimed for the integration. That uid
// is the folder's owner: stable across runs, so files from an earlier run
// stay writable, and held by no other integration on the host, whatever
// state folder it uses: the host-wide record (hostUIDFolder) says which
// key holds which uid, and a uid is never one another key holds, one
// another folder in PARENT is owned by, or one a host account or (when new
// to the key) a running process has.
//
// A missing folder takes over PARENT/LEGACY, the folder an earlier egressd
// named after the id alone, when legacy is not "": the caller passes it
// only when version memory shows that folder was this integration's. A
// symlink there is never taken. When the record does not know the key
// (a new key, or a lost record), the folder's owner claims its uid for the
// key if nothing above holds it; otherwise the key gets a fresh uid,
// derived from the name and probed under both locks.
func ClaimStateFolder(parent, name, legacy string) (dir string, uid int, err error) {
	lock, err := lockedFolder(parent)
	if err != nil {
		return "", 0, err
	}
	defer lock.Close()
	at := int(lock.Fd())
	dir = filepath.Join(parent, name)
	if err := adoptLegacy(at, legacy, name, unix.S_IFDIR); err != nil {
		return "", 0, err
	}
	if err := unix.Mkdirat(at, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return "", 0, &os.PathError{Op: "mkdir", Path: dir, Err: err}
	}
	if os.Geteuid() != 0 {
		return dir, os.Getuid(), nil // a normal user's sandbox runs as that user
	}
	owners, err := folderOwners(lock)
	if err != nil {
		return "", 0, err
	}
	taken := map[int]bool{}
	for other, o := range owners {
		if other != name {
			taken[o] = true
		}
	}
	record, err := openHostUIDs()
	if err != nil {
		return "", 0, err
	}
	defer record.Close()
	if uid, err = pickHostUID(record, name, owners[name], taken); err != nil {
		return "", 0, err
	}
	abs, err := workdir.Abs(dir) // a later run may start elsewhere
	if err != nil {
		return "", 0, err
	}
	if err := record.save(name, uid, abs); err != nil {
		return "", 0, err
	}
	if err := unix.Fchownat(at, name, uid, uid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return "", 0, &os.PathError{Op: "chown", Path: dir, Err: err}
	}
	return dir, uid, nil
}

// lockedFolder makes and opens the folder path in the state folder without
// following a link there (safefile.MakeFolder), and takes its lock.
func lockedFolder(path string) (*os.File, error) {
	lock, err := safefile.MakeFolder(path)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		lock.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return lock, nil
}

// folderOwners maps each folder in the open folder parent to its owner;
// symlinks and files are not folders.
func folderOwners(parent *os.File) (map[string]int, error) {
	fd, err := unix.Openat(int(parent.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: parent.Name(), Err: err}
	}
	list := os.NewFile(uintptr(fd), parent.Name())
	defer list.Close()
	names, err := list.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	owners := map[string]int{}
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, &os.PathError{Op: "stat", Path: filepath.Join(parent.Name(), name), Err: err}
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		owners[name] = int(st.Uid)
	}
	return owners, nil
}

// adoptLegacy renames legacy to name in the open folder at when legacy is
// not "", name does not exist, and legacy is an entry of type kind (not a
// symlink). The caller holds the folder's lock.
func adoptLegacy(at int, legacy, name string, kind uint32) error {
	if legacy == "" || legacy == name {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstatat(at, name, &st, unix.AT_SYMLINK_NOFOLLOW); !errors.Is(err, unix.ENOENT) {
		return err // there already, or unreadable
	}
	if err := unix.Fstatat(at, legacy, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != kind {
		return nil // nothing to take over
	}
	return unix.Renameat(at, legacy, at, name)
}

// StateUse is what a state folder holds on the host disk.
type StateUse struct {
	Bytes int64 // allocated blocks, not apparent sizes: a sparse file costs what it holds
	Files int
}

// TidyStateFolder makes every entry of dir owned by uid:gid (when uid is
// not -1) and clears setuid and setgid bits, without following a symlink
// anywhere: each step is relative to an open directory fd, so a program
// that swaps a folder for a symlink to /etc mid-walk redirects nothing.
// egressd runs it before each run (files of an earlier run become writable
// again) and after (the program leaves no setuid file on the host). It
// returns what the folder holds.
func TidyStateFolder(dir string, uid, gid int) (StateUse, error) {
	var use StateUse
	fd, restore, err := openForWalk(unix.AT_FDCWD, dir)
	if err != nil {
		return use, fmt.Errorf("state folder %s: %w", dir, err)
	}
	if uid != -1 {
		if err := unix.Fchown(fd, uid, gid); err != nil {
			unix.Close(fd)
			return use, errors.Join(err, restore())
		}
	}
	err = tidy(fd, uid, gid, 0, &use)
	return use, errors.Join(err, restore())
}

// openForWalk opens the folder name in dirfd for reading, without following
// a symlink. The program can leave a folder its owner cannot read or
// search (mode --x, or 0); as a normal user egressd is that owner, and has
// no capability to read past the mode, so the folder gets u+rx for the
// walk and restore puts the program's mode back. (The other way, walking
// in a user namespace where the owner is root, needs a helper process;
// the owner's chmod needs nothing but the owner.) The chmod goes through
// an O_PATH descriptor of the folder itself, never through a name.
func openForWalk(dirfd int, name string) (fd int, restore func() error, err error) {
	path, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, nil, err
	}
	restore = func() error { return unix.Close(path) }
	var st unix.Stat_t
	if err := unix.Fstat(path, &st); err != nil {
		restore()
		return -1, nil, err
	}
	const readable = unix.S_IRUSR | unix.S_IXUSR
	if mode := st.Mode & 0o7777; mode&readable != readable {
		magic := "/proc/self/fd/" + strconv.Itoa(path)
		if err := unix.Chmod(magic, mode|readable); err != nil {
			restore()
			return -1, nil, err
		}
		restore = func() error { return errors.Join(unix.Chmod(magic, mode), unix.Close(path)) }
	}
	fd, err = unix.Openat(path, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, nil, errors.Join(err, restore())
	}
	return fd, restore, nil
}

// tidy walks the directory fd, which it closes.
func tidy(fd, uid, gid, depth int, use *StateUse) error {
	d := os.NewFile(uintptr(fd), "state")
	defer d.Close()
	if depth > maxStateDepth {
		return fmt.Errorf("state folder nested deeper than %d", maxStateDepth)
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		use.Bytes += st.Blocks * 512
		use.Files++
		if uid != -1 && (int(st.Uid) != uid || int(st.Gid) != gid) {
			if err := unix.Fchownat(fd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return err
			}
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			sub, restore, err := openForWalk(fd, name)
			if err != nil {
				return err
			}
			if err := errors.Join(tidy(sub, uid, gid, depth+1, use), restore()); err != nil {
				return err
			}
		case unix.S_IFREG:
			if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
				if err := clearSetID(fd, name); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// clearSetID drops the setuid and setgid bits of a regular file, opened
// O_PATH without following a symlink and checked to be the regular file it
// was; the chmod goes through the fd's magic link, so a file of mode 0000
// is handled too.
func clearSetID(dirfd int, name string) error {
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), st.Mode&0o7777&^(unix.S_ISUID|unix.S_ISGID))
}
