package selftest

import (
	"context"
	"os/exec"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hostPoolProbes reach for what the host shares among all its processes:
// the kernel's AIO events (fs.aio-max-nr), memory outside RLIMIT_DATA (a
// stack mapping), memory locked on the launcher's account (SHM_LOCK), and
// a CPU share of one's own (a new session is a new autogroup).
func hostPoolProbes() []probe {
	return []probe{
		{"legacy-aio", LayerSeccomp, probeLegacyAIO},
		{"mmap-growsdown", LayerSeccomp, probeGrowsDown},
		{"shm-lock", LayerSeccomp, probeShmLock},
		{"setsid", LayerSeccomp, probeSetsid},
		{"core-limit", LayerLimits, probeCoreLimit},
		{"mmap-hugetlb", LayerSeccomp, probeHugeTLB},
		{"page-cache-nowait", LayerSeccomp, probeNowaitRead},
		{"socketpair-family", LayerSeccomp, probeSocketpairFamily},
		{"bind-to-interface", LayerSeccomp, probeBindToInterface},
	}
}

func probeLegacyAIO(context.Context, *Config) (string, string) {
	var ctx uintptr
	if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&ctx)), 0); e == 0 {
		unix.Syscall(unix.SYS_IO_DESTROY, ctx, 0, 0)
		return opened("io_setup took an AIO context from the host's pool")
	}
	return reach("io_setup", unix.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&ctx)), 0)
}

// probeGrowsDown maps one page as a stack: VM_GROWSDOWN, which
// RLIMIT_DATA does not count, at any size.
func probeGrowsDown(context.Context, *Config) (string, string) {
	const page = 4096
	addr, _, e := unix.Syscall6(unix.SYS_MMAP, 0, page, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_GROWSDOWN, ^uintptr(0), 0)
	if e == 0 {
		unix.Syscall(unix.SYS_MUNMAP, addr, page, 0)
		return opened("mapped memory with MAP_GROWSDOWN, which RLIMIT_DATA does not count")
	}
	return closed("mmap(MAP_GROWSDOWN): %s", e)
}

// probeShmLock locks a SysV segment of its own, which the kernel charges
// to the user the sandbox maps to.
func probeShmLock(context.Context, *Config) (string, string) {
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600)
	if err != nil {
		return skipped("shmget: %v", err)
	}
	defer unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	const shmLock = 11 // SHM_LOCK, linux/shm.h
	return reach("shmctl(SHM_LOCK)", unix.SYS_SHMCTL, uintptr(id), shmLock, 0)
}

// probeSetsid starts a child that calls setsid (Go's fork does, before
// exec): a session of its own is a scheduler group of its own.
func probeSetsid(context.Context, *Config) (string, string) {
	cmd := exec.Command("/proc/self/exe", ProbeArg, "noop")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return closed("setsid in a child: %s", short(err))
	}
	cmd.Wait()
	return opened("started a process in a session of its own")
}

// probeCoreLimit lowers its own RLIMIT_CORE to 0: with a pipe
// core_pattern every value but 1 starts the host's core helper, as root,
// with the crashing program's memory.
func probeCoreLimit(context.Context, *Config) (string, string) {
	unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &r); err != nil {
		return skipped("getrlimit(RLIMIT_CORE): %v", err)
	}
	if r.Cur != 1 {
		return opened("RLIMIT_CORE is %d/%d: a crash reaches a pipe core_pattern's helper", r.Cur, r.Max)
	}
	return closed("RLIMIT_CORE stays 1 (no core, no core helper)")
}

// probeHugeTLB maps a huge page: the host's hugetlb pool, which no
// sandbox bound counts. A host with no pool answers ENOMEM, which is
// the kernel's and is OPEN all the same.
func probeHugeTLB(context.Context, *Config) (string, string) {
	const size = 2 << 20
	addr, _, e := unix.Syscall6(unix.SYS_MMAP, 0, size, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_HUGETLB, ^uintptr(0), 0)
	if e == 0 {
		unix.Syscall(unix.SYS_MUNMAP, addr, size, 0)
		return opened("mapped a page of the host's hugetlb pool")
	}
	if e == unix.EPERM {
		return closed("mmap(MAP_HUGETLB): %s", e)
	}
	return opened("mmap(MAP_HUGETLB) reached the kernel: %s", e)
}

// probeNowaitRead asks whether a file's first page is cached without
// blocking (preadv2 RWF_NOWAIT): with fadvise DONTNEED, a watch on when
// host processes read a host file bound into the sandbox.
func probeNowaitRead(context.Context, *Config) (string, string) {
	fd, err := unix.Open("/proc/self/exe", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return skipped("open: %v", err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 64)
	iov := unix.Iovec{Base: &buf[0], Len: uint64(len(buf))}
	_, _, e := unix.Syscall6(unix.SYS_PREADV2, uintptr(fd), uintptr(unsafe.Pointer(&iov)), 1, 0, 0, unix.RWF_NOWAIT)
	if e == unix.EOPNOTSUPP {
		return closed("preadv2(RWF_NOWAIT): %s", e)
	}
	return opened("preadv2(RWF_NOWAIT) answered %v: a page cache probe", errnoOrOK(e))
}

// probeSocketpairFamily asks socketpair for a family socket() is refused:
// the kernel loads a family's module on demand.
func probeSocketpairFamily(context.Context, *Config) (string, string) {
	var sv [2]int32
	_, _, e := unix.RawSyscall6(unix.SYS_SOCKETPAIR, unix.AF_TIPC, unix.SOCK_STREAM, 0, uintptr(unsafe.Pointer(&sv)), 0, 0)
	if e == 0 {
		unix.Close(int(sv[0]))
		unix.Close(int(sv[1]))
		return opened("socketpair(AF_TIPC) succeeded")
	}
	// EAFNOSUPPORT is both the filter's answer and a kernel's without the
	// family: an invalid type tells them apart, as for socket.
	_, _, e = unix.RawSyscall6(unix.SYS_SOCKETPAIR, unix.AF_TIPC, sockTypeInvalid, 0, uintptr(unsafe.Pointer(&sv)), 0, 0)
	if e == unix.EAFNOSUPPORT {
		return closed("socketpair(AF_TIPC): %s", e)
	}
	return opened("socketpair(AF_TIPC) reached the kernel: %s", e)
}

// probeBindToInterface names lo as a socket's outgoing interface: its
// packets to any address then leave by lo, past the default route through
// egress0 that audits every attempt.
func probeBindToInterface(context.Context, *Config) (string, string) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return closed("socket: %v", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptString(fd, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, "lo"); err != nil {
		return closed("setsockopt(SO_BINDTODEVICE, lo): %v", err)
	}
	return opened("setsockopt(SO_BINDTODEVICE, lo) succeeded: packets to any address leave by lo, unaudited")
}

func errnoOrOK(e unix.Errno) string {
	if e == 0 {
		return "a result"
	}
	return e.Error()
}
