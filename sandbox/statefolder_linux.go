package sandbox

import "golang.org/x/sys/unix"

// remountNoSuidNoDev makes the writable state folder's mount nosuid and
// nodev: the program can create a setuid file or a device node there, but
// neither means anything, in the sandbox or (through this mount) to it. The
// flags the kernel locked on the source mount are kept, or a user namespace
// may not remount it.
func remountNoSuidNoDev(target string) error {
	var sfs unix.Statfs_t
	if err := unix.Statfs(target, &sfs); err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
	for st, ms := range map[int64]uintptr{unix.ST_RDONLY: unix.MS_RDONLY, unix.ST_NOEXEC: unix.MS_NOEXEC,
		unix.ST_NOATIME: unix.MS_NOATIME, unix.ST_NODIRATIME: unix.MS_NODIRATIME, unix.ST_RELATIME: unix.MS_RELATIME} {
		if sfs.Flags&st != 0 {
			flags |= ms
		}
	}
	return unix.Mount("", target, "", flags, "")
}
