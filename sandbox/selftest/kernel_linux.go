package selftest

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func kernelProbes() []probe {
	return []probe{
		{"capabilities", LayerCaps, probeCaps},
		{"no-new-privs", LayerCaps, probeNoNewPrivs},
		{"nested-user-namespace", LayerSeccomp, probeNestedUserNS},
		{"mount", LayerSeccomp, probeMount},
		{"ptrace", LayerSeccomp, probePtrace},
		{"io_uring", LayerSeccomp, func(context.Context, *Config) (string, string) {
			var params [120]byte // struct io_uring_params
			return reach("io_uring_setup", unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
		}},
		// An invalid command: the kernel answers EINVAL only once the
		// call has reached it, whatever the bpf sysctls say.
		{"bpf", LayerSeccomp, func(context.Context, *Config) (string, string) { return reach("bpf", unix.SYS_BPF, 0xffff, 0, 0) }},
		{"perf_event_open", LayerSeccomp, func(context.Context, *Config) (string, string) {
			return reach("perf_event_open", unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0))
		}},
		{"keyctl", LayerSeccomp, func(context.Context, *Config) (string, string) {
			return reach("keyctl(GET_KEYRING_ID, session)", unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, keySpecSession, 0)
		}},
		{"userfaultfd", LayerSeccomp, func(context.Context, *Config) (string, string) {
			return reach("userfaultfd", unix.SYS_USERFAULTFD, unix.O_CLOEXEC|uffdUserModeOnly, 0, 0)
		}},
		// A watch on a folder bound from the host sees the host's own
		// activity there: refused whole, whatever the folder.
		{"inotify", LayerSeccomp, func(context.Context, *Config) (string, string) {
			return reach("inotify_init1", unix.SYS_INOTIFY_INIT1, unix.IN_CLOEXEC, 0, 0)
		}},
		{"fanotify", LayerSeccomp, func(context.Context, *Config) (string, string) {
			return reach("fanotify_init(FAN_REPORT_FID)", unix.SYS_FANOTIFY_INIT, unix.FAN_CLASS_NOTIF|unix.FAN_REPORT_FID|unix.FAN_CLOEXEC, unix.O_RDONLY, 0)
		}},
		{"dnotify", LayerSeccomp, probeDnotify},
		{"tiocsti", LayerSeccomp, func(context.Context, *Config) (string, string) { return probeTIOCSTI(unix.TIOCSTI) }},
		{"tiocsti-high-bit", LayerSeccomp, func(context.Context, *Config) (string, string) { return probeTIOCSTI(unix.TIOCSTI | highBit) }},
		{"tiocsctty", LayerSeccomp, func(context.Context, *Config) (string, string) {
			return probeIoctlOnPipe("ioctl(TIOCSCTTY)", unix.TIOCSCTTY, 0)
		}},
		{"tiocsserial", LayerSeccomp, func(context.Context, *Config) (string, string) {
			var serial [128]byte // struct serial_struct, and room to spare
			return probeIoctlOnPipe("ioctl(TIOCSSERIAL|1<<32)", unix.TIOCSSERIAL|highBit, uintptr(unsafe.Pointer(&serial[0])))
		}},
		{"socket-vsock-high-bit", LayerSeccomp, func(context.Context, *Config) (string, string) {
			return socketReach("socket(AF_VSOCK|1<<32)", unix.AF_VSOCK|highBit, unix.SOCK_STREAM, 0)
		}},
		{"socket-netlink-uevent-high-bit", LayerSeccomp, func(context.Context, *Config) (string, string) {
			return socketReach("socket(AF_NETLINK|1<<32, NETLINK_KOBJECT_UEVENT)", unix.AF_NETLINK|highBit, unix.SOCK_RAW, unix.NETLINK_KOBJECT_UEVENT)
		}},
		{"socket-packet", LayerSeccomp, func(context.Context, *Config) (string, string) {
			return socketReach("socket(AF_PACKET)", unix.AF_PACKET, unix.SOCK_RAW, 0)
		}},
		{"foreign-abi", LayerSeccomp, killable("foreign-abi")},
		{"x32-abi", LayerSeccomp, killable("x32-abi")},
		{"pidfd-getfd-parent", LayerPID, probePidfdGetfd},
		{"process-vm-readv-parent", LayerSeccomp, probeVMReadv},
		{"signal-supervisor", LayerPID, probeSignalParent},
		{"terminal", LayerTTY, probeTerminal},
	}
}

const (
	dnAccess         = 1 // DN_ACCESS (linux/fcntl.h), which x/sys/unix does not name
	highBit          = 1 << 32
	keySpecSession   = ^uintptr(2) // KEY_SPEC_SESSION_KEYRING, -3
	uffdUserModeOnly = 1           // UFFD_USER_MODE_ONLY
)

// reach makes the call and judges by whether it reached the kernel: EPERM
// (the seccomp filter's answer, or a kernel without the privilege) and
// ENOSYS are closed; a descriptor, a result or any other error means the
// kernel's code for it ran, and is OPEN.
func reach(what string, nr, a1, a2, a3 uintptr) (string, string) {
	r, _, e := unix.Syscall(nr, a1, a2, a3)
	switch e {
	case 0:
		if strings.HasPrefix(what, "socket") || what == "io_uring_setup" || what == "userfaultfd" ||
			what == "inotify_init1" || strings.HasPrefix(what, "fanotify_init") {
			unix.Close(int(r))
		}
		return opened("%s succeeded", what)
	case unix.EPERM, unix.ENOSYS, unix.EACCES:
		return closed("%s: %s", what, e)
	}
	return opened("%s reached the kernel: %s", what, e)
}

// sockTypeInvalid is a socket type past SOCK_MAX that passes the flag
// check: the kernel answers EINVAL for it before it looks the family up.
const sockTypeInvalid = 0xf

// socketReach makes a socket call the filter must refuse. The filter
// answers a refused family with EAFNOSUPPORT, as does a kernel that lacks
// the family (which it may load on demand), so that answer is checked
// again with an invalid type: the kernel says EINVAL for it before the
// family is looked up, the filter still EAFNOSUPPORT.
func socketReach(what string, family, typ, proto uintptr) (string, string) {
	v, d := reach(what, unix.SYS_SOCKET, family, typ|unix.SOCK_CLOEXEC, proto)
	if !strings.HasSuffix(d, unix.EAFNOSUPPORT.Error()) {
		return v, d
	}
	switch _, _, e := unix.Syscall(unix.SYS_SOCKET, family, sockTypeInvalid|unix.SOCK_CLOEXEC, proto); e {
	case unix.EAFNOSUPPORT, unix.EPERM:
		return closed("%s: %s (the filter's answer: with an invalid type too)", what, e)
	default:
		return opened("%s reached the kernel: %s, and with an invalid type the kernel answered %s: no filter refused it", what, unix.EAFNOSUPPORT, e)
	}
}

// probeTIOCSTI sends TIOCSTI to a pipe of its own (probeIoctlOnPipe).
func probeTIOCSTI(req uintptr) (string, string) {
	var c byte
	name := "ioctl(TIOCSTI)"
	if req&highBit != 0 {
		name = "ioctl(TIOCSTI|1<<32)"
	}
	return probeIoctlOnPipe(name, req, uintptr(unsafe.Pointer(&c)))
}

// probeIoctlOnPipe sends a terminal ioctl to a pipe of its own: the
// kernel answers ENOTTY once the call reaches it, so nothing is ever typed
// into or taken from a real terminal, and no Landlock device rule is in
// the way.
func probeIoctlOnPipe(name string, req, arg uintptr) (string, string) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return skipped("pipe: %v", err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	return reach(name, unix.SYS_IOCTL, uintptr(p[0]), req, arg)
}

func probeCaps(context.Context, *Config) (string, string) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return skipped("read /proc/self/status: %v", err)
	}
	var held []string
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(k, "Cap") || k == "CapInh" {
			continue
		}
		if n, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64); n != 0 {
			held = append(held, k+"="+strings.TrimSpace(v))
		}
	}
	if len(held) > 0 {
		return opened("capabilities held: %s", strings.Join(held, " "))
	}
	return closed("effective, permitted, ambient and bounding sets are empty")
}

func probeNoNewPrivs(context.Context, *Config) (string, string) {
	v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return skipped("prctl: %v", err)
	}
	if v != 1 {
		return opened("no_new_privs is off: a setuid program gains privileges")
	}
	return closed("no_new_privs is set")
}

// probeNestedUserNS starts a child in a new user namespace, where it would
// hold every capability again.
func probeNestedUserNS(context.Context, *Config) (string, string) {
	cmd := exec.Command("/proc/self/exe", ProbeArg, "noop")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
	if err := cmd.Start(); err != nil {
		return closed("clone(CLONE_NEWUSER): %s", short(err))
	}
	cmd.Process.Kill()
	cmd.Wait()
	return opened("started a process in a new user namespace")
}

func probeMount(context.Context, *Config) (string, string) {
	dir, err := os.MkdirTemp("", "egressd-selftest-mount-")
	if err != nil {
		return skipped("no folder to mount on: %v", err)
	}
	defer os.Remove(dir)
	if err := unix.Mount("egressd-selftest", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=4k"); err != nil {
		return closed("mount tmpfs: %s", short(err))
	}
	unix.Unmount(dir, unix.MNT_DETACH)
	return opened("mounted a tmpfs on %s", dir)
}

// probePtrace attaches to a process of its own: whether tracing works at
// all. Tracing the init is the attack; a child is the safe witness.
func probePtrace(context.Context, *Config) (string, string) {
	cmd := exec.Command("/proc/self/exe", ProbeArg, "sleep", "10")
	if err := cmd.Start(); err != nil {
		return skipped("cannot start a process to trace: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.PtraceAttach(cmd.Process.Pid); err != nil {
		return closed("ptrace(PTRACE_ATTACH): %s", short(err))
	}
	unix.PtraceDetach(cmd.Process.Pid)
	return opened("attached to pid %d with ptrace", cmd.Process.Pid)
}

// x32ABI calls keyctl through the x32 ABI (the syscall number with bit 30
// set), which a filter that matches numbers only lets through. It runs in
// a process of its own (killable): the filter kills the whole process.
func x32ABI() (string, string) {
	if runtime.GOARCH != "amd64" {
		return skipped("x32 exists on amd64 only")
	}
	const x32 = 0x40000000
	_, _, e := unix.Syscall(x32|unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, keySpecSession&0xffffffff, 0)
	switch e {
	case unix.ENOSYS:
		return skipped("this kernel has no x32 ABI")
	case unix.EPERM:
		return closed("x32 keyctl: EPERM")
	case 0:
		return opened("x32 keyctl succeeded")
	}
	return opened("x32 keyctl reached the kernel: %s", e)
}

// probeSignalParent sends SIGUSR2, which Go ignores unless asked, to the
// process that started this one. The outer half counts what it received:
// that count decides. Nothing else is ever signalled.
func probeSignalParent(context.Context, *Config) (string, string) {
	ppid := os.Getppid()
	if err := unix.Kill(ppid, unix.SIGUSR2); err != nil {
		return closed("kill(%d, SIGUSR2): %s", ppid, short(err))
	}
	return closed("sent SIGUSR2 to its parent, pid %d (the supervisor counts what arrives)", ppid)
}

// pidfdThread is PIDFD_THREAD (linux/pidfd.h): a pidfd for one thread.
const pidfdThread = unix.O_EXCL

// parentThreads are the ids of every thread of this process's parent: in
// a sandbox, the init's, one of which may hold fewer capabilities than the
// rest (the one that started this program) and so pass checks the others
// would not.
func parentThreads() (int, []int) {
	ppid := os.Getppid()
	tids := []int{ppid}
	ents, _ := os.ReadDir("/proc/" + strconv.Itoa(ppid) + "/task")
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil && tid != ppid {
			tids = append(tids, tid)
		}
	}
	return ppid, tids
}

// probePidfdGetfd takes copies of its parent's descriptors (in a sandbox,
// the init's: its control socket, its bind sources) with pidfd_getfd,
// through a pidfd for each of the parent's threads.
func probePidfdGetfd(context.Context, *Config) (string, string) {
	ppid, tids := parentThreads()
	var last error
	for _, tid := range tids {
		flags := 0
		if tid != ppid {
			flags = pidfdThread
		}
		pidfd, err := unix.PidfdOpen(tid, flags)
		if err != nil {
			last = err
			continue
		}
		// Past the standard three first: the init's control socket and
		// bind sources are the prize.
		for i := 0; i < 64; i++ {
			fd := (i + 3) % 64
			got, err := unix.PidfdGetfd(pidfd, fd, 0)
			if err == nil {
				target, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(got))
				unix.Close(got)
				unix.Close(pidfd)
				return opened("took descriptor %d (%s) from its parent, pid %d, through thread %d", fd, target, ppid, tid)
			}
			if errnoOf(err) != unix.EBADF {
				last = err
			}
		}
		unix.Close(pidfd)
	}
	return closed("pidfd_getfd on pid %d's %d threads: %s", ppid, len(tids), short(last))
}

// probeVMReadv reads its parent's memory with process_vm_readv, through
// each of its threads. EFAULT still means the permission check passed.
// The kernel's own access check (the init is not dumpable and holds
// capabilities the program lacks) answers EPERM as the filter does, so an
// EPERM is asked again with invalid flags: the kernel says EINVAL for
// those before any check, the filter still EPERM.
func probeVMReadv(context.Context, *Config) (string, string) {
	ppid, tids := parentThreads()
	buf := make([]byte, 8)
	local := []unix.Iovec{{Base: &buf[0], Len: uint64(len(buf))}}
	remote := []unix.RemoteIovec{{Base: 0x401000, Len: len(buf)}}
	var last error
	for _, tid := range tids {
		_, err := unix.ProcessVMReadv(tid, local, remote, 0)
		switch e := errnoOf(err); {
		case err == nil:
			return opened("read pid %d's memory through thread %d", ppid, tid)
		case e == unix.EPERM || e == unix.ESRCH || e == unix.ENOSYS || e == unix.EACCES:
			last = err
		default:
			return opened("process_vm_readv on pid %d's thread %d passed the permission check: %s", ppid, tid, short(err))
		}
	}
	if errnoOf(last) == unix.EPERM {
		if _, err := unix.ProcessVMReadv(ppid, local, remote, 1); errnoOf(err) == unix.EINVAL {
			return opened("the seccomp filter let process_vm_readv through (with invalid flags the kernel answered EINVAL); "+
				"only the kernel's access check refused pid %d: %s", ppid, short(last))
		}
	}
	return closed("process_vm_readv on pid %d's %d threads: %s", ppid, len(tids), short(last))
}

// probeDnotify asks for access notices on a system folder bound from the
// host with fcntl(F_NOTIFY), inotify's predecessor. EINVAL is the filter's
// answer (and a kernel's built without dnotify); success is OPEN. Closing
// the folder ends the watch.
func probeDnotify(context.Context, *Config) (string, string) {
	fd, err := unix.Open("/usr/bin", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return skipped("/usr/bin: %v", err)
	}
	defer unix.Close(fd)
	switch _, err := unix.FcntlInt(uintptr(fd), unix.F_NOTIFY, dnAccess); err {
	case nil:
		return opened("fcntl(/usr/bin, F_NOTIFY, DN_ACCESS) succeeded")
	case unix.EINVAL, unix.EPERM:
		return closed("fcntl(F_NOTIFY): %v", err)
	default:
		return opened("fcntl(F_NOTIFY) reached the kernel: %v", err)
	}
}
