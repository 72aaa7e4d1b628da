package selftest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Bounds are the resource limits in force as the sandboxed program sees
// them. "unlimited" is said plainly.
type Bounds struct {
	Processes  string `json:"processes"`  // RLIMIT_NPROC
	OpenFiles  string `json:"open_files"` // RLIMIT_NOFILE
	AddrSpace  string `json:"address_space"`
	FileSize   string `json:"file_size"`     // RLIMIT_FSIZE
	Stack      string `json:"stack"`         // RLIMIT_STACK
	LockedMem  string `json:"locked_memory"` // RLIMIT_MEMLOCK
	Nice       string `json:"nice"`
	CgroupPids string `json:"cgroup_pids"` // pids.max, where the cgroup is visible
	CgroupMem  string `json:"cgroup_memory"`
}

func readBounds() Bounds {
	rl := func(res int) string {
		var r unix.Rlimit
		if err := unix.Getrlimit(res, &r); err != nil {
			return "unknown: " + err.Error()
		}
		if r.Cur == unix.RLIM_INFINITY {
			return "unlimited"
		}
		return strconv.FormatUint(r.Cur, 10)
	}
	b := Bounds{Processes: rl(unix.RLIMIT_NPROC), OpenFiles: rl(unix.RLIMIT_NOFILE), AddrSpace: rl(unix.RLIMIT_AS), FileSize: rl(unix.RLIMIT_FSIZE)}
	b.Stack, b.LockedMem, b.Nice = rl(unix.RLIMIT_STACK), rl(unix.RLIMIT_MEMLOCK), niceValue()
	b.CgroupPids, b.CgroupMem = cgroupFile("pids.max"), cgroupFile("memory.max")
	return b
}

// cgroupFile reads a cgroup v2 control file of this process's own cgroup.
func cgroupFile(name string) string {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "not visible"
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			v, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", path, name))
			if err != nil {
				return "not visible"
			}
			return strings.TrimSpace(string(v))
		}
	}
	return "not visible"
}

// niceValue is this process's nice value (getpriority's raw result is
// 20 - nice).
func niceValue() string {
	r, _, e := unix.Syscall(unix.SYS_GETPRIORITY, unix.PRIO_PROCESS, 0, 0)
	if e != 0 {
		return "unknown: " + e.Error()
	}
	return strconv.Itoa(20 - int(r))
}
