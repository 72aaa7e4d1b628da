package sandbox

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"

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
// stay writable, and distinct from the owner of every other folder in
// PARENT, so no integration can write another's state.
//
// A missing folder takes over PARENT/LEGACY, the folder an earlier egressd
// named after the id alone, when legacy is not "": the caller passes it
// only when version memory shows that folder was this integration's. A
// symlink there is never taken. A new folder, or one
// whose owner another folder shares (as the per-process uids of earlier
// versions could), gets a fresh uid, derived from the name and probed for
// uniqueness under a lock.
func ClaimStateFolder(parent, name, legacy string) (dir string, uid int, err error) {
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", 0, err
	}
	lock, err := os.Open(parent)
	if err != nil {
		return "", 0, err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", 0, fmt.Errorf("lock %s: %w", parent, err)
	}
	dir = filepath.Join(parent, name)
	if err := adoptLegacy(parent, legacy, name, unix.S_IFDIR); err != nil {
		return "", 0, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", 0, err
	}
	if os.Geteuid() != 0 {
		return dir, os.Getuid(), nil // a normal user's sandbox runs as that user
	}
	owners, err := folderOwners(parent)
	if err != nil {
		return "", 0, err
	}
	mine := owners[name]
	if mine >= stateUIDBase && mine < stateUIDBase+stateUIDSpan && !sharedOwner(owners, name) {
		return dir, mine, nil
	}
	taken := map[int]bool{}
	for other, o := range owners {
		if other != name {
			taken[o] = true
		}
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	uid = stateUIDBase + int(h.Sum32()%stateUIDSpan)
	for taken[uid] {
		uid = stateUIDBase + (uid-stateUIDBase+1)%stateUIDSpan
	}
	if err := os.Lchown(dir, uid, uid); err != nil {
		return "", 0, err
	}
	return dir, uid, nil
}

// folderOwners maps each folder in parent to its owner; a symlink or a file
// in its place is an error, since the folder is bound into a sandbox.
func folderOwners(parent string) (map[string]int, error) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil, err
	}
	owners := map[string]int{}
	for _, e := range entries {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(parent, e.Name()), &st); err != nil {
			return nil, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		owners[e.Name()] = int(st.Uid)
	}
	return owners, nil
}

func sharedOwner(owners map[string]int, name string) bool {
	for other, o := range owners {
		if other != name && o == owners[name] {
			return true
		}
	}
	return false
}

// adoptLegacy renames parent/legacy to parent/name when legacy is not "",
// name does not exist, and legacy is an entry of type kind (not a symlink).
// The caller holds parent's lock.
func adoptLegacy(parent, legacy, name string, kind uint32) error {
	if legacy == "" || legacy == name {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(parent, name), &st); !errors.Is(err, unix.ENOENT) {
		return err // there already, or unreadable
	}
	if err := unix.Lstat(filepath.Join(parent, legacy), &st); err != nil || st.Mode&unix.S_IFMT != kind {
		return nil // nothing to take over
	}
	return os.Rename(filepath.Join(parent, legacy), filepath.Join(parent, name))
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
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return use, fmt.Errorf("state folder %s: %w", dir, err)
	}
	if uid != -1 {
		if err := unix.Fchown(fd, uid, gid); err != nil {
			unix.Close(fd)
			return use, err
		}
	}
	err = tidy(fd, uid, gid, 0, &use)
	return use, err
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
			sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			if err := tidy(sub, uid, gid, depth+1, use); err != nil {
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
