package safefile

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// pseudoFS names the kernel file systems whose "regular files" are not
// files: /proc/kmsg says it is regular and empty, then blocks every read
// until the kernel logs (and consumes what it reads from every other
// reader); a manifest an integration links there must not stall a load.
var pseudoFS = map[int64]string{
	unix.PROC_SUPER_MAGIC: "procfs", unix.SYSFS_MAGIC: "sysfs", unix.DEBUGFS_MAGIC: "debugfs",
	unix.TRACEFS_MAGIC: "tracefs", unix.SECURITYFS_MAGIC: "securityfs", unix.CGROUP_SUPER_MAGIC: "cgroupfs",
	unix.CGROUP2_SUPER_MAGIC: "cgroup2fs", unix.BPF_FS_MAGIC: "bpffs",
	unix.EFIVARFS_MAGIC: "efivarfs", unix.PSTOREFS_MAGIC: "pstorefs",
}

// onPseudoFS refuses f when it lies on one of them.
func onPseudoFS(f *os.File, path string) error {
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if name, ok := pseudoFS[int64(fs.Type)]; ok {
		return fmt.Errorf("%s: is a file of the kernel's %s, not a regular file", path, name)
	}
	return nil
}
