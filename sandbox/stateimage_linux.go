package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Constants of linux/loop.h and linux/mount.h that x/sys does not name.
const (
	loFlagsAutoclear = 4
	fsopenCloexec    = 1
	fsmountCloexec   = 1
)

// maxLoopAttempts bounds the retries when another process takes the loop
// device LOOP_CTL_GET_FREE offered.
const maxLoopAttempts = 8

// MountStateImage returns a detached mount (nosuid, nodev) of the
// integration's state: an ext4 filesystem in the image file path, of
// sizeMB, whose root uid owns. The kernel holds the bound: the program gets
// ENOSPC when the filesystem is full, and nothing it writes reaches the host
// disk beyond the image. A missing image is made with mkfs.ext4, seeded with
// the contents of seed (the folder earlier versions used), so state moves
// into it once. Root only: it needs a loop device.
//
// Every mount of one image goes through one loop device, so concurrent runs
// of an integration share one ext4 superblock and never mount the same
// filesystem twice.
func MountStateImage(path string, sizeMB, uid int, seed string) (*os.File, error) {
	// The lock makes "find the image's loop device, or attach one" atomic
	// among egressd processes. It is on the folder, not the image: a loop
	// device keeps the image's open file, and a lock on it, for its life.
	// Everything below is relative to it: the folder is never looked up by
	// name again.
	lock, err := lockedFolder(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := makeStateImage(lock, filepath.Base(path), sizeMB, uid, seed); err != nil {
		return nil, err
	}
	fd, err := unix.Openat(int(lock.Fd()), filepath.Base(path), unix.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("state image %s: %w (a symlink is not followed here)", path, err)
	}
	img := os.NewFile(uintptr(fd), path)
	defer img.Close()
	if err := ownImage(img, path); err != nil {
		return nil, err
	}
	loop, err := imageLoop(img)
	if err != nil {
		return nil, err
	}
	defer loop.Close() // held open until mounted: an open loop device is never auto-cleared
	return mountExt4(loop.Name())
}

// ClaimStateImage returns the path of the state image named name (from
// StateName) in dir. A missing image takes over the one an earlier egressd
// named after the id alone, legacy, when legacy is not "" (see
// ClaimStateFolder).
func ClaimStateImage(dir, name, legacy string) (string, error) {
	lock, err := lockedFolder(dir)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if legacy != "" {
		legacy = StateImageName(legacy)
	}
	if err := adoptLegacy(int(lock.Fd()), legacy, StateImageName(name), unix.S_IFREG); err != nil {
		return "", err
	}
	return filepath.Join(dir, StateImageName(name)), nil
}

// makeStateImage creates the image name in the open folder dir, if
// missing, under a temporary name and renames it into place, so a
// half-made image is never used.
func makeStateImage(dir *os.File, name string, sizeMB, uid int, seed string) error {
	at, path := int(dir.Fd()), filepath.Join(dir.Name(), name)
	var st unix.Stat_t
	if err := unix.Fstatat(at, name, &st, unix.AT_SYMLINK_NOFOLLOW); !errors.Is(err, unix.ENOENT) {
		return err // there already (checked when opened), or unreadable
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		for _, p := range []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"} {
			if _, serr := os.Stat(p); serr == nil {
				mkfs, err = p, nil
			}
		}
	}
	if err != nil {
		return fmt.Errorf("the state folder's size bound needs mkfs.ext4 (e2fsprogs): %w", err)
	}
	tmp := name + ".new"
	unix.Unlinkat(at, tmp, 0)
	fd, err := unix.Openat(at, tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "create", Path: path + ".new", Err: err}
	}
	f := os.NewFile(uintptr(fd), path+".new")
	defer f.Close()
	if err := f.Truncate(int64(sizeMB) << 20); err != nil {
		unix.Unlinkat(at, tmp, 0)
		return err
	}
	args := []string{"-q", "-F", "-m", "0", "-E", fmt.Sprintf("root_owner=%d:%d", uid, uid)}
	if entries, err := os.ReadDir(seed); err == nil && len(entries) > 0 {
		args = append(args, "-d", seed)
	}
	// mkfs gets the file egressd created, by descriptor: the folder's owner
	// could swap the name for a link to a disk between create and mkfs.
	cmd := exec.Command(mkfs, append(args, "/dev/fd/3")...)
	cmd.ExtraFiles = []*os.File{f}
	if out, err := cmd.CombinedOutput(); err != nil {
		unix.Unlinkat(at, tmp, 0)
		return fmt.Errorf("mkfs.ext4 %s: %v: %s", f.Name(), err, out)
	}
	return unix.Renameat(at, tmp, at, name)
}

// ownImage checks, on the open image, that it is egressd's own: a regular
// file with one link, owned by this process's user. The images folder sits
// in the state folder, which may be the service user's: a file it put
// there (a crafted filesystem) or a hard link to another file is refused
// before a loop device is attached to it.
func ownImage(img *os.File, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(img.Fd()), &st); err != nil {
		return fmt.Errorf("state image %s: %w", path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("state image %s is not a regular file: remove it", path)
	case st.Nlink != 1:
		return fmt.Errorf("state image %s has %d hard links, so it is not egressd's own: remove it", path, st.Nlink)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("state image %s is owned by uid %d, not by egressd (uid %d): someone else made it; remove it", path, st.Uid, os.Geteuid())
	}
	return unix.SetNonblock(int(img.Fd()), false)
}

// imageLoop returns an open loop device backed by img: the one already
// attached to it, or a new one (auto-cleared once nothing holds it).
func imageLoop(img *os.File) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(img.Fd()), &st); err != nil {
		return nil, err
	}
	devices, _ := filepath.Glob("/dev/loop[0-9]*")
	for _, d := range devices {
		loop, err := os.OpenFile(d, os.O_RDONLY|unix.O_CLOEXEC, 0) // read-only: only held, never written
		if err != nil {
			continue
		}
		info, err := unix.IoctlLoopGetStatus64(int(loop.Fd()))
		if err == nil && info.Device == st.Dev && info.Inode == st.Ino {
			return loop, nil
		}
		loop.Close()
	}
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("the state folder's size bound needs a loop device: %w", err)
	}
	defer ctl.Close()
	for attempt := 0; attempt < maxLoopAttempts; attempt++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("loop-control: %w", err)
		}
		loop, err := os.OpenFile("/dev/loop"+strconv.Itoa(n), os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		cfg := unix.LoopConfig{Fd: uint32(img.Fd()), Info: unix.LoopInfo64{Flags: loFlagsAutoclear}}
		err = unix.IoctlLoopConfigure(int(loop.Fd()), &cfg)
		if err == nil {
			return loop, nil
		}
		loop.Close()
		if !errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("attach %s: %w", loop.Name(), err)
		}
	}
	return nil, errors.New("no free loop device")
}

// mountExt4 mounts the device as a detached mount (fsopen, fsmount): it
// exists nowhere in the host's tree, only in the sandbox it is passed to.
func mountExt4(device string) (*os.File, error) {
	fs, err := unix.Fsopen("ext4", fsopenCloexec)
	if err != nil {
		return nil, fmt.Errorf("fsopen ext4: %w", err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "source", device); err != nil {
		return nil, fmt.Errorf("mount %s: %w", device, err)
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return nil, fmt.Errorf("mount %s: %w", device, err)
	}
	mnt, err := unix.Fsmount(fs, fsmountCloexec, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", device, err)
	}
	return os.NewFile(uintptr(mnt), "state"), nil
}
