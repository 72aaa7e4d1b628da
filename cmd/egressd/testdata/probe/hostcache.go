package main

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugeTLB reaches for the host's hugetlb pool three ways: an anonymous
// mapping, a SysV segment and a memfd, each also with bit 32 set in the
// flags where the flags are an int.
func hugeTLB() {
	const size = 2 << 20
	prot, flags := uintptr(unix.PROT_READ|unix.PROT_WRITE), uintptr(unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_HUGETLB)
	for _, c := range []struct {
		name  string
		flags uintptr
	}{{"mmap(MAP_HUGETLB)", flags}, {"mmap(MAP_HUGETLB|1<<32)", flags | 1<<32}} {
		addr, _, errno := unix.RawSyscall6(unix.SYS_MMAP, 0, size, prot, c.flags, ^uintptr(0), 0)
		report(c.name, errno)
		if errno == 0 {
			unix.RawSyscall(unix.SYS_MUNMAP, addr, size, 0)
		}
	}
	const shmHugeTLB = 0o4000 // SHM_HUGETLB, linux/shm.h
	for _, c := range []struct {
		name string
		flg  uintptr
	}{{"shmget(SHM_HUGETLB)", unix.IPC_CREAT | 0o600 | shmHugeTLB}, {"shmget(SHM_HUGETLB|1<<32)", unix.IPC_CREAT | 0o600 | shmHugeTLB | 1<<32}} {
		id, _, errno := unix.RawSyscall(unix.SYS_SHMGET, unix.IPC_PRIVATE, size, c.flg)
		report(c.name, errno)
		if errno == 0 {
			unix.SysvShmCtl(int(id), unix.IPC_RMID, nil)
		}
	}
	name := []byte("huge\x00")
	for _, c := range []struct {
		name  string
		flags uintptr
	}{{"memfd_create(MFD_HUGETLB)", unix.MFD_HUGETLB}, {"memfd_create(MFD_HUGETLB|1<<32)", unix.MFD_HUGETLB | 1<<32}} {
		fd, _, errno := unix.RawSyscall(unix.SYS_MEMFD_CREATE, uintptr(unsafe.Pointer(&name[0])), c.flags, 0)
		report(c.name, errno)
		if errno == 0 {
			unix.Close(int(fd))
		}
	}
}

// pageCache is the attacker's watch on a bound host file: evict its pages
// (fadvise DONTNEED, or madvise PAGEOUT/COLD on a mapping of it), then
// ask without blocking whether they are back (preadv2 RWF_NOWAIT: EAGAIN
// when not cached), which says whether a host process read it since. It
// reports what a read that must not block answers with the file cached,
// and after each eviction.
func pageCache(path string) {
	f, err := os.Open(path)
	if err != nil {
		fmt.Println("open:", err)
		return
	}
	defer f.Close()
	fd := int(f.Fd())
	buf := make([]byte, 4096)
	nowait := func(name string, flags uintptr) {
		iov := unix.Iovec{Base: &buf[0], Len: uint64(len(buf))}
		_, _, errno := unix.Syscall6(unix.SYS_PREADV2, uintptr(fd), uintptr(unsafe.Pointer(&iov)), 1, 0, 0, flags)
		report(name, errno)
	}
	cache := func() { unix.Pread(fd, buf, 0) }
	cache()
	nowait("preadv2(RWF_NOWAIT) cached", unix.RWF_NOWAIT)
	nowait("preadv2(RWF_NOWAIT|1<<32) cached", unix.RWF_NOWAIT|1<<32)
	const fadvDontNeed = 4 // POSIX_FADV_DONTNEED
	_, _, errno := unix.Syscall6(unix.SYS_FADVISE64, uintptr(fd), 0, 0, fadvDontNeed, 0, 0)
	report("fadvise(DONTNEED)", errno)
	nowait("preadv2(RWF_NOWAIT) after fadvise", unix.RWF_NOWAIT)
	nowait("preadv2(0) after fadvise", 0)
	for _, advice := range []struct {
		name string
		v    int
	}{{"MADV_PAGEOUT", unix.MADV_PAGEOUT}, {"MADV_COLD", unix.MADV_COLD}} {
		cache()
		m, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			fmt.Println("mmap:", err)
			return
		}
		_ = m[0]
		_, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(unsafe.Pointer(&m[0])), 4096, uintptr(advice.v))
		report("madvise("+advice.name+")", errno)
		unix.Munmap(m)
		nowait("preadv2(RWF_NOWAIT) after "+advice.name, unix.RWF_NOWAIT)
	}
	_, _, errno = unix.Syscall6(unix.SYS_CACHESTAT, uintptr(fd), 0, 0, 0, 0, 0)
	report("cachestat", errno)
	// KSM opt-in: merged pages are shared with other processes' identical
	// ones, and a write's timing tells whether they were.
	_, _, errno = unix.Syscall6(unix.SYS_PRCTL, unix.PR_SET_MEMORY_MERGE, 1, 0, 0, 0, 0)
	report("prctl(PR_SET_MEMORY_MERGE)", errno)
	anon, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		fmt.Println("mmap:", err)
		return
	}
	_, _, errno = unix.Syscall(unix.SYS_MADVISE, uintptr(unsafe.Pointer(&anon[0])), 4096, unix.MADV_MERGEABLE)
	report("madvise(MADV_MERGEABLE)", errno)
}

// socketPair asks socketpair for families socket() is refused, with and
// without bit 32 set, and for the unix pair programs use.
func socketPair() {
	var sv [2]int32
	for _, c := range []struct {
		name   string
		family uintptr
	}{{"socketpair(AF_UNIX)", unix.AF_UNIX}, {"socketpair(AF_VSOCK)", unix.AF_VSOCK}, {"socketpair(AF_NETLINK)", unix.AF_NETLINK},
		{"socketpair(AF_INET)", unix.AF_INET}, {"socketpair(AF_TIPC)", unix.AF_TIPC}, {"socketpair(AF_UNIX|1<<32)", unix.AF_UNIX | 1<<32},
		{"socketpair(AF_TIPC|1<<32)", unix.AF_TIPC | 1<<32}} {
		_, _, errno := unix.RawSyscall6(unix.SYS_SOCKETPAIR, c.family, unix.SOCK_STREAM, 0, uintptr(unsafe.Pointer(&sv)), 0, 0)
		report(c.name, errno)
		if errno == 0 {
			unix.Close(int(sv[0]))
			unix.Close(int(sv[1]))
		}
	}
}
