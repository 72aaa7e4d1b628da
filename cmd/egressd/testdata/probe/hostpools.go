package main

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Attacks on host-wide pools a sandbox must not draw from. Each prints
// one line per call: "name: allowed" or "name: ERRNO".

func report(name string, errno unix.Errno) {
	if errno == 0 {
		fmt.Printf("%s: allowed\n", name)
		return
	}
	fmt.Printf("%s: %s\n", name, errnoName(errno))
}

// legacyAIO takes a context from fs.aio-max-nr, the host's one pool of
// AIO events, and makes the other AIO calls on a context that is not one.
func legacyAIO() {
	var ctx uintptr
	_, _, errno := unix.RawSyscall(unix.SYS_IO_SETUP, 4096, uintptr(unsafe.Pointer(&ctx)), 0)
	report("io_setup", errno)
	if errno == 0 {
		unix.RawSyscall(unix.SYS_IO_DESTROY, ctx, 0, 0)
	}
	for _, c := range []struct {
		name string
		nr   uintptr
	}{{"io_destroy", unix.SYS_IO_DESTROY}, {"io_submit", unix.SYS_IO_SUBMIT}, {"io_cancel", unix.SYS_IO_CANCEL},
		{"io_getevents", unix.SYS_IO_GETEVENTS}, {"io_pgetevents", unix.SYS_IO_PGETEVENTS}} {
		_, _, errno := unix.RawSyscall6(c.nr, 0, 0, 0, 0, 0, 0)
		report(c.name, errno)
	}
}

// growsDown maps private memory as a stack (MAP_GROWSDOWN: VM_STACK,
// which RLIMIT_DATA does not count), small and past the memory bound,
// touches it, and grows the main thread's stack in place with mremap.
func growsDown(mb int) {
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	for _, m := range []struct {
		name  string
		size  int
		flags int
	}{
		{"mmap(1 MB, GROWSDOWN)", 1 << 20, flags | unix.MAP_GROWSDOWN},
		{fmt.Sprintf("mmap(%d MB, GROWSDOWN)", mb), mb << 20, flags | unix.MAP_GROWSDOWN},
		{fmt.Sprintf("mmap(%d MB, GROWSDOWN|1<<32)", mb), mb << 20, flags | unix.MAP_GROWSDOWN | 1<<32},
		{fmt.Sprintf("mmap(%d MB)", mb), mb << 20, flags},
	} {
		addr, _, errno := unix.RawSyscall6(unix.SYS_MMAP, 0, uintptr(m.size), unix.PROT_READ|unix.PROT_WRITE, uintptr(m.flags), ^uintptr(0), 0)
		report(m.name, errno)
		if errno == 0 {
			touch(addr, m.size)
			unix.RawSyscall(unix.SYS_MUNMAP, addr, uintptr(m.size), 0)
		}
	}
	start, end := stackVMA()
	if start == 0 {
		fmt.Println("mremap([stack]): no stack mapping")
		return
	}
	grow := uintptr(mb) << 20
	addr, _, errno := unix.RawSyscall6(unix.SYS_MREMAP, start, end-start, end-start+grow, 0, 0, 0)
	report(fmt.Sprintf("mremap([stack], +%d MB)", mb), errno)
	if errno == 0 {
		touch(addr+(end-start), int(grow))
	}
	var stack unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_STACK, &stack)
	fmt.Printf("RLIMIT_STACK: %d %d\n", stack.Cur, stack.Max)
}

// touch has the kernel write zeros on every page (a read from
// /dev/zero), so the memory is really taken.
func touch(addr uintptr, size int) {
	fd, err := unix.Open("/dev/zero", unix.O_RDONLY, 0)
	if err != nil {
		fmt.Println("touch:", err)
		return
	}
	defer unix.Close(fd)
	for done := 0; done < size; {
		n, _, errno := unix.Syscall(unix.SYS_READ, uintptr(fd), addr+uintptr(done), uintptr(min(size-done, 64<<20)))
		if errno != 0 || n == 0 {
			fmt.Printf("touch: %d of %d bytes: %v\n", done, size, errno)
			return
		}
		done += int(n)
	}
}

// stackVMA is the main thread's [stack] mapping, from /proc/self/maps.
func stackVMA() (start, end uintptr) {
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		var s, e uintptr
		var rest string
		if n, _ := fmt.Sscanf(l, "%x-%x %s", &s, &e, &rest); n == 3 && strings.HasSuffix(l, "[stack]") {
			return s, e
		}
	}
	return 0, 0
}

// shmLock locks a SysV segment in memory (charged to the launcher's uid
// for a normal user's sandbox) and mlocks a page (RLIMIT_MEMLOCK).
func shmLock() {
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 1<<20, unix.IPC_CREAT|0o600)
	if err != nil {
		fmt.Println("shmget:", err)
		return
	}
	defer unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	_, _, errno := unix.RawSyscall(unix.SYS_SHMCTL, uintptr(id), shmLockCmd, 0)
	report("shmctl(SHM_LOCK)", errno)
	_, _, errno = unix.RawSyscall(unix.SYS_SHMCTL, uintptr(id), shmLockCmd|1<<32, 0)
	report("shmctl(SHM_LOCK|1<<32)", errno)
	page := make([]byte, 4096)
	_, _, errno = unix.RawSyscall(unix.SYS_MLOCK, uintptr(unsafe.Pointer(&page[0])), 4096, 0)
	report("mlock", errno)
	var memlock unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_MEMLOCK, &memlock)
	fmt.Printf("RLIMIT_MEMLOCK: %d %d\n", memlock.Cur, memlock.Max)
}

// schedule reports the program's nice value and tries to leave the
// sandbox's session (and autogroup) and to lower its nice value.
func schedule() {
	// getpriority's raw result is 20 - nice.
	r, _, _ := unix.RawSyscall(unix.SYS_GETPRIORITY, unix.PRIO_PROCESS, 0, 0)
	fmt.Printf("nice: %d\n", 20-int(r))
	_, _, errno := unix.RawSyscall(unix.SYS_SETSID, 0, 0, 0)
	report("setsid", errno)
	_, _, errno = unix.RawSyscall(unix.SYS_SETPRIORITY, unix.PRIO_PROCESS, 0, 0)
	report("setpriority(0)", errno)
}

// shmLockCmd is SHM_LOCK (linux/shm.h), which x/sys/unix does not name.
const shmLockCmd = 11
