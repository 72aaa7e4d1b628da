package sandbox

import (
	"fmt"
	"sort"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The baseline seccomp filter is assembled here, by hand, from a table of
// rules, because two things a library's generic filter got wrong are the
// whole point:
//
//   - The architecture. A process can make system calls through another
//     ABI (i386 through int 0x80, x32 with bit 30 set in the number), where
//     every number means another call. The filter kills any call whose
//     seccomp_data.arch is not the native one, and on amd64 any x32 call.
//   - Argument width. The kernel reads an int argument (a socket family,
//     an ioctl request) from the low 32 bits of its register and ignores
//     the rest; a filter that compares 64 bits is bypassed by setting bit
//     32. Every condition on an int loads only the low 32-bit word; a
//     pointer (prlimit64's new limit) is tested on each word by a rule
//     of its own.

// seccomp_data offsets (linux/seccomp.h).
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// x32SyscallBit marks an x32 system call on amd64.
const x32SyscallBit = 0x40000000

// Filter results.
const (
	retAllow = unix.SECCOMP_RET_ALLOW
	retKill  = unix.SECCOMP_RET_KILL_PROCESS
)

func retErrno(e unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e) }

// cond is one test on the low 32 bits of an argument.
type cond struct {
	arg   int
	op    condOp
	value uint32
	mask  uint32 // with maskedEqual: the bits compared
	high  bool   // test the high word instead: only for a pointer, never an int
}

type condOp int

const (
	equal       condOp = iota
	notEqual           // used in conjunctions: "none of these values"
	anyBits            // any of value's bits set
	maskedEqual        // the bits in mask equal value: a whole range of ioctls
)

// rule makes call nr return action when all its conditions hold.
type rule struct {
	name   string
	nr     uint32
	conds  []cond
	action uint32
}

// namespaceFlags are the clone/unshare flags that make a new namespace.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWTIME

// deniedCalls return EPERM whatever their arguments: namespaces and mounts,
// io_uring (which bypasses seccomp for its operations), tracing and other
// processes' memory and descriptors, BPF, perf, userfaultfd, the kernel
// keyring, modules, kexec, file handles (which open by inode, past every
// path check) and the host's kernel log.
var deniedCalls = map[string]uint32{
	"setns": unix.SYS_SETNS, "mount": unix.SYS_MOUNT, "umount2": unix.SYS_UMOUNT2, "pivot_root": unix.SYS_PIVOT_ROOT,
	"chroot": unix.SYS_CHROOT, "open_tree": unix.SYS_OPEN_TREE, "open_tree_attr": unix.SYS_OPEN_TREE_ATTR,
	"move_mount": unix.SYS_MOVE_MOUNT, "fsopen": unix.SYS_FSOPEN, "fsmount": unix.SYS_FSMOUNT, "fsconfig": unix.SYS_FSCONFIG,
	"fspick": unix.SYS_FSPICK, "mount_setattr": unix.SYS_MOUNT_SETATTR,
	"io_uring_setup": unix.SYS_IO_URING_SETUP, "io_uring_enter": unix.SYS_IO_URING_ENTER, "io_uring_register": unix.SYS_IO_URING_REGISTER,
	"ptrace": unix.SYS_PTRACE, "process_vm_readv": unix.SYS_PROCESS_VM_READV, "process_vm_writev": unix.SYS_PROCESS_VM_WRITEV,
	"pidfd_getfd": unix.SYS_PIDFD_GETFD, "bpf": unix.SYS_BPF, "perf_event_open": unix.SYS_PERF_EVENT_OPEN,
	"userfaultfd": unix.SYS_USERFAULTFD, "keyctl": unix.SYS_KEYCTL, "add_key": unix.SYS_ADD_KEY, "request_key": unix.SYS_REQUEST_KEY,
	"kexec_load": unix.SYS_KEXEC_LOAD, "kexec_file_load": unix.SYS_KEXEC_FILE_LOAD, "init_module": unix.SYS_INIT_MODULE,
	"finit_module": unix.SYS_FINIT_MODULE, "delete_module": unix.SYS_DELETE_MODULE,
	"open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT, "name_to_handle_at": unix.SYS_NAME_TO_HANDLE_AT,
	"syslog": unix.SYS_SYSLOG, // the host's kernel log, readable by anyone where kernel.dmesg_restrict=0
}

// unimplementedCalls return ENOSYS, on which libcs and libuv fall back to
// threads: legacy AIO, whose io_setup takes events from fs.aio-max-nr, one
// pool for the whole host, which a sandbox could empty for every other
// process.
var unimplementedCalls = map[string]uint32{
	"io_setup": unix.SYS_IO_SETUP, "io_destroy": unix.SYS_IO_DESTROY, "io_submit": unix.SYS_IO_SUBMIT,
	"io_cancel": unix.SYS_IO_CANCEL, "io_getevents": unix.SYS_IO_GETEVENTS, "io_pgetevents": unix.SYS_IO_PGETEVENTS,
}

// deniedIoctls write to a terminal the target may share with the user:
// TIOCSTI and TIOCLINUX type into it; the rest change its line discipline,
// flow, modes and size under the user's shell, discard what the user
// typed (TCFLSH), lock the user out of reopening it (TIOCEXCL) or undo a
// lock the user set (TIOCNXCL), or send
// breaks and set modem lines on a serial line.
var deniedIoctls = map[string]uint32{
	"TIOCSTI": unix.TIOCSTI, "TIOCLINUX": unix.TIOCLINUX, "TIOCSETD": unix.TIOCSETD, "TCXONC": unix.TCXONC,
	"TCSETS": unix.TCSETS, "TCSETSW": unix.TCSETSW, "TCSETSF": unix.TCSETSF,
	"TCSETS2": unix.TCSETS2, "TCSETSW2": unix.TCSETSW2, "TCSETSF2": unix.TCSETSF2,
	"TCSETA": unix.TCSETA, "TCSETAW": unix.TCSETAW, "TCSETAF": unix.TCSETAF, "TIOCSWINSZ": unix.TIOCSWINSZ,
	"TCFLSH": unix.TCFLSH, "TIOCEXCL": unix.TIOCEXCL, "TIOCNXCL": unix.TIOCNXCL, "TCSBRK": unix.TCSBRK, "TCSBRKP": unix.TCSBRKP,
	"TIOCSBRK": unix.TIOCSBRK, "TIOCCBRK": unix.TIOCCBRK, "TIOCMSET": unix.TIOCMSET, "TIOCMBIS": unix.TIOCMBIS, "TIOCMBIC": unix.TIOCMBIC,
	// A terminal the program is handed is not its own to control: it
	// does not take it as its controlling terminal (TIOCSCTTY: the owner's
	// rights on a console, and the kernel's hangup of it when the program
	// exits, which broke the launcher's descriptor), move the user's job
	// control to its own process group (TIOCSPGRP), ignore the modem's
	// carrier (TIOCSSOFTCAR), take the console's output (TIOCCONS) or hang
	// it up (TIOCVHANGUP). TIOCNOTTY stays: it only gives up a
	// controlling terminal, and the program is started with none.
	"TIOCSCTTY": unix.TIOCSCTTY, "TIOCSPGRP": unix.TIOCSPGRP, "TIOCSSOFTCAR": unix.TIOCSSOFTCAR,
	"TIOCCONS": unix.TIOCCONS, "TIOCVHANGUP": unix.TIOCVHANGUP,
	// A serial line handed to the program keeps what it is set to after
	// egressd exits, and Restore does not know these: its port settings,
	// speed flags and custom divisor (TIOCSSERIAL), RS485 and ISO7816 modes,
	// locked modes (TIOCSLCKTRMIOS), and the termiox and multiport setters
	// (TCSETX*, TIOCSERSETMULTI, TIOCSERCONFIG), which newer kernels no
	// longer implement. Every setter in include/uapi/asm-generic/ioctls.h.
	"TIOCSSERIAL": unix.TIOCSSERIAL, "TIOCSRS485": unix.TIOCSRS485, "TIOCSISO7816": unix.TIOCSISO7816,
	"TIOCSLCKTRMIOS": unix.TIOCSLCKTRMIOS, "TCSETX": unix.TCSETX, "TCSETXF": unix.TCSETXF, "TCSETXW": unix.TCSETXW,
	"TIOCSERSETMULTI": unix.TIOCSERSETMULTI, "TIOCSERCONFIG": unix.TIOCSERCONFIG,
	// A pty master is a terminal too, so one handed to the program reaches
	// it as it is: TIOCSIG would send SIGINT, SIGQUIT or SIGTSTP to the
	// slave's foreground job, a host process, with no permission check,
	// and TIOCPKT would change what the host's reader of the master gets.
	"TIOCSIG": unix.TIOCSIG, "TIOCPKT": unix.TIOCPKT,
}

// deniedIoctlRanges are whole families of ioctls, by the request's low 32
// bits under a mask: every console ioctl (linux/kd.h, type 'K': keyboard
// and display modes, key maps, fonts, LEDs) and every virtual terminal
// ioctl (linux/vt.h, 0x56xx: switching and locking VTs). They are old-style
// numbers with no direction or size bits, which the kernel compares whole,
// so the mask takes exactly the 256 numbers of each (and not V4L2's 'V'
// ioctls, which carry size bits).
var deniedIoctlRanges = map[string]cond{
	"KD*": {arg: 1, op: maskedEqual, value: 0x4B00, mask: 0xFFFFFF00},
	"VT*": {arg: 1, op: maskedEqual, value: 0x5600, mask: 0xFFFFFF00},
}

// allowedFamilies are the only socket families: no packet, vsock (the
// hypervisor), bluetooth, CAN, key or any other way out of the network
// namespace, and no netlink: a route-netlink socket's error acks echo each
// request into its receive queue, about 200 KB a socket charged to no
// cgroup (16,008 sockets held 3 GB while the sandbox's group showed
// 23 MB), and a sandbox has nothing to configure. glibc's getaddrinfo
// (AI_ADDRCONFIG) and getifaddrs cope; Go's net.Interfaces and Node's
// os.networkInterfaces fail.
var allowedFamilies = []uint32{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6}

// allowedPersonalities are the personality(2) values Docker's default
// profile allows; the rest change how the kernel reads memory layouts.
var allowedPersonalities = []uint32{0, perLinux32, uname26, uname26 | perLinux32, 0xffffffff}

// linux/personality.h
const (
	perLinux32 = 0x0008
	uname26    = 0x0020000
)

// baselineRules is the whole policy, in order.
func baselineRules() []rule {
	eperm := retErrno(unix.EPERM)
	var rules []rule
	for _, name := range sortedKeys(deniedCalls) {
		rules = append(rules, rule{name: name, nr: deniedCalls[name], action: eperm})
	}
	rules = append(rules,
		rule{name: "unshare(namespaces)", nr: unix.SYS_UNSHARE, conds: []cond{{arg: 0, op: anyBits, value: namespaceFlags}}, action: eperm},
		rule{name: "clone(namespaces)", nr: unix.SYS_CLONE, conds: []cond{{arg: 0, op: anyBits, value: namespaceFlags}}, action: eperm},
		// clone3 passes its flags in memory a filter cannot read: ENOSYS
		// makes libcs fall back to clone.
		rule{name: "clone3", nr: unix.SYS_CLONE3, action: retErrno(unix.ENOSYS)},
	)
	var families []cond
	for _, f := range allowedFamilies {
		families = append(families, cond{arg: 0, op: notEqual, value: f})
	}
	// MPTCP: its subflows are kernel sockets of their own, a second path
	// for the memory the TCP bounds count (tcpBuffers, boundConnections),
	// which a program never needs. EPROTONOSUPPORT is what a kernel
	// without MPTCP answers, on which Go (whose listeners try MPTCP first
	// since 1.24) and mptcpize fall back to TCP. It comes before the
	// family rule, so protocol 262 gets this answer in any family.
	rules = append(rules, rule{name: "socket(IPPROTO_MPTCP)", nr: unix.SYS_SOCKET, conds: []cond{{arg: 2, op: equal, value: unix.IPPROTO_MPTCP}},
		action: retErrno(unix.EPROTONOSUPPORT)})
	rules = append(rules, rule{name: "socket(other families)", nr: unix.SYS_SOCKET, conds: families, action: retErrno(unix.EAFNOSUPPORT)})
	for _, name := range sortedKeys(deniedIoctls) {
		rules = append(rules, rule{name: "ioctl(" + name + ")", nr: unix.SYS_IOCTL, conds: []cond{{arg: 1, op: equal, value: deniedIoctls[name]}}, action: eperm})
	}
	for _, name := range []string{"KD*", "VT*"} {
		rules = append(rules, rule{name: "ioctl(" + name + ")", nr: unix.SYS_IOCTL, conds: []cond{deniedIoctlRanges[name]}, action: eperm})
	}
	// prlimit64 on another process: the init shares the program's uid, and
	// a CPU limit of one second on it let the program kill it. glibc's and
	// Go's setrlimit/getrlimit pass pid 0 (the caller), which stays.
	rules = append(rules, rule{name: "prlimit64(another process)", nr: unix.SYS_PRLIMIT64, conds: []cond{{arg: 0, op: notEqual, value: 0}}, action: eperm})
	// A socket's buffer sizes stay within the sandbox namespace's tcp_rmem
	// and tcp_wmem: SO_RCVBUF and SO_SNDBUF could raise one connection to
	// twice the host's net.core.rmem_max (8 MB here), charged to the host's
	// single tcp_mem pool. The call succeeds and does nothing (errno 0):
	// programs treat the size as a hint, and the kernel keeps autotuning.
	for _, opt := range []uint32{unix.SO_RCVBUF, unix.SO_SNDBUF, unix.SO_RCVBUFFORCE, unix.SO_SNDBUFFORCE} {
		rules = append(rules, rule{name: "setsockopt(SOL_SOCKET, buffer size)", nr: unix.SYS_SETSOCKOPT,
			conds: []cond{{arg: 1, op: equal, value: unix.SOL_SOCKET}, {arg: 2, op: equal, value: opt}}, action: retErrno(0)})
	}
	rules = append(rules, tcpKeyRules()...)
	rules = append(rules, interfaceRules()...)
	var personas []cond
	for _, p := range allowedPersonalities {
		personas = append(personas, cond{arg: 0, op: notEqual, value: p})
	}
	rules = append(rules, rule{name: "personality(other)", nr: unix.SYS_PERSONALITY, conds: personas, action: eperm})
	rules = append(rules, hostWatchRules()...)
	rules = append(rules, coreLimitRules()...)
	rules = append(rules, hugeTLBRules()...)
	rules = append(rules, pageCacheRules()...)
	rules = append(rules, socketpairRule())
	return append(rules, hostPoolRules()...)
}

// interfaceOptions name the interface a socket's packets leave by, past
// the routing table: with lo, a datagram or a SYN to any address left
// through lo, not the default route through egress0, and no audit line
// named it (round 52). It went nowhere (the sandbox's namespace forwards
// nothing), but every attempt must be seen. They are refused with EPERM,
// as a kernel refuses a change of SO_BINDTODEVICE without CAP_NET_RAW.
// IP_PKTINFO in a sendmsg control message does the same, and seccomp
// cannot read a control message: that residual is in the README.
var interfaceOptions = []struct{ level, opt uint32 }{
	{unix.SOL_SOCKET, unix.SO_BINDTODEVICE}, {unix.SOL_SOCKET, unix.SO_BINDTOIFINDEX},
	{unix.IPPROTO_IP, unix.IP_UNICAST_IF}, {unix.IPPROTO_IP, unix.IP_MULTICAST_IF},
	{unix.IPPROTO_IPV6, unix.IPV6_UNICAST_IF}, {unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_IF},
}

func interfaceRules() []rule {
	var rules []rule
	for _, o := range interfaceOptions {
		rules = append(rules, rule{name: "setsockopt(an outgoing interface)", nr: unix.SYS_SETSOCKOPT,
			conds: []cond{{arg: 1, op: equal, value: o.level}, {arg: 2, op: equal, value: o.opt}}, action: retErrno(unix.EPERM)})
	}
	return rules
}

// tcpKeyOptions are the TCP socket options that install authentication
// keys: TCP_MD5SIG, TCP_MD5SIG_EXT, and TCP-AO's (linux/tcp.h, which
// x/sys/unix does not all name: TCP_AO_ADD_KEY 38, TCP_AO_DEL_KEY 39,
// TCP_AO_INFO 40, TCP_AO_GET_KEYS 41, TCP_AO_REPAIR 42). Their keys are
// kernel memory charged to no cgroup (sock_kmalloc), one per peer, on
// sockets that need not be bound, which no socket count sees: 1,000
// sockets of TCP_MD5SIG keys held 128 MB per process. Only BGP routers
// use them; optMemMax bounds them too, this is the second layer.
var tcpKeyOptions = []uint32{unix.TCP_MD5SIG, unix.TCP_MD5SIG_EXT, 38, 39, 40, 41, 42}

// tcpKeyRules refuse tcpKeyOptions with ENOPROTOOPT, what a kernel built
// without TCP MD5 or TCP-AO answers.
func tcpKeyRules() []rule {
	var rules []rule
	for _, opt := range tcpKeyOptions {
		rules = append(rules, rule{name: "setsockopt(IPPROTO_TCP, keys)", nr: unix.SYS_SETSOCKOPT,
			conds: []cond{{arg: 1, op: equal, value: unix.IPPROTO_TCP}, {arg: 2, op: equal, value: opt}}, action: retErrno(unix.ENOPROTOOPT)})
	}
	return rules
}

// watchCalls return ENOSYS: the folders bound read-only into the sandbox
// (/usr, /etc/ssl/certs) are the host's own inodes, and inotify events are
// per inode, not per mount or namespace, so a watch there saw every host
// process that ran a program or opened a file, live, and two sandboxes
// could signal each other by opening files in a shared folder. Neither
// seccomp nor Landlock can tell a bound host folder from the sandbox's
// own, so inotify goes whole. ENOSYS says plainly that the kernel has no
// such call; a watcher must poll instead (node's fs.watch throws ENOSYS
// and chokidar reports it unless told usePolling; fs.watchFile works):
// the documented cost.
// archWatchCalls adds the legacy inotify_init where the ABI has it.
var watchCalls = map[string]uint32{"inotify_init1": unix.SYS_INOTIFY_INIT1}

// hostWatchRules refuse inotify (watchCalls), fanotify, whose inode
// marks (FAN_REPORT_FID, allowed without privilege since Linux 5.13) see
// the same host activity (EPERM is what a kernel that refuses
// unprivileged fanotify answers), and dnotify, inotify's predecessor:
// fcntl(F_NOTIFY) on any folder the program can open signals it on each
// access, write, create or delete there; EINVAL is what a kernel built
// without dnotify answers. And leases: a normal user's sandbox owns the
// launcher's files bound into it (the launcher's uid is its root), and a
// lease on one signalled the program at each open on the host and held
// that open up to lease-break-time (45 s). EINVAL is a kernel's answer
// without file locking; no integration serves files over SMB or NFS.
func hostWatchRules() []rule {
	rules := []rule{
		{name: "fanotify_init", nr: unix.SYS_FANOTIFY_INIT, action: retErrno(unix.EPERM)},
		{name: "fcntl(F_NOTIFY)", nr: unix.SYS_FCNTL, conds: []cond{{arg: 1, op: equal, value: unix.F_NOTIFY}}, action: retErrno(unix.EINVAL)},
		{name: "fcntl(F_SETLEASE)", nr: unix.SYS_FCNTL, conds: []cond{{arg: 1, op: equal, value: unix.F_SETLEASE}}, action: retErrno(unix.EINVAL)},
	}
	for _, calls := range []map[string]uint32{watchCalls, archWatchCalls} {
		for _, name := range sortedKeys(calls) {
			rules = append(rules, rule{name: name, nr: calls[name], action: retErrno(unix.ENOSYS)})
		}
	}
	return rules
}

// hostPoolRules keep the program out of memory no sandbox bound counts.
// The kernel leaves a stack mapping (VM_GROWSDOWN, VM_STACK) out of
// RLIMIT_DATA: a MAP_GROWSDOWN mapping, or the main stack grown in place
// by mremap, held any size (the stack's growth by faults stays bounded by
// RLIMIT_STACK). No runtime maps its stacks so (glibc's and Go's thread
// stacks are plain private mappings); mremap fails as a full address
// space does, and glibc's realloc then copies. SHM_LOCK charges a locked
// SysV segment to the launcher's uid, past the sandbox's RLIMIT_MEMLOCK.
func hostPoolRules() []rule {
	rules := []rule{
		{name: "mmap(MAP_GROWSDOWN)", nr: unix.SYS_MMAP, conds: []cond{{arg: 3, op: anyBits, value: unix.MAP_GROWSDOWN}}, action: retErrno(unix.EPERM)},
		{name: "mremap", nr: unix.SYS_MREMAP, action: retErrno(unix.ENOMEM)},
		{name: "shmctl(SHM_LOCK)", nr: unix.SYS_SHMCTL, conds: []cond{{arg: 1, op: equal, value: shmLock}}, action: retErrno(unix.EPERM)},
		// A pipe may not grow past the default 64 KiB (16 pages): pipe
		// buffers count against the per-uid fs.pipe-user-pages-soft
		// (64 MiB), which a normal user's sandbox shares with its
		// launcher, and 64 pipes grown to 1 MiB took it all (every other
		// process of that uid then got 2-page pipes and EPERM here). EPERM
		// is the kernel's own answer past pipe-max-size or the quota;
		// shrinking, and asking for exactly the default, stay.
		{name: "fcntl(F_SETPIPE_SZ, 64 KiB)", nr: unix.SYS_FCNTL, conds: []cond{{arg: 1, op: equal, value: unix.F_SETPIPE_SZ}, {arg: 2, op: equal, value: defaultPipeBytes}}, action: retAllow},
		{name: "fcntl(F_SETPIPE_SZ, over 64 KiB)", nr: unix.SYS_FCNTL, conds: []cond{{arg: 1, op: equal, value: unix.F_SETPIPE_SZ}, {arg: 2, op: anyBits, value: ^uint32(defaultPipeBytes - 1)}}, action: retErrno(unix.EPERM)},
	}
	for _, name := range sortedKeys(unimplementedCalls) {
		rules = append(rules, rule{name: name, nr: unimplementedCalls[name], action: retErrno(unix.ENOSYS)})
	}
	return rules
}

// defaultPipeBytes is a new pipe's buffer, 16 pages (PIPE_DEF_BUFFERS).
const defaultPipeBytes = 16 * 4096

// coreLimitRules keep RLIMIT_CORE at CoreLimit: a program that lowered it
// to 0 would have its crash piped to the host's core helper again (a pipe
// core_pattern ignores every value but 1). Setting it succeeds and does
// nothing (errno 0, as for socket buffer sizes): scripts run "ulimit -c
// 0" to be safe, and must not fail for it; no core is written either way.
// prlimit64 is refused only with a new limit: the pointer is tested on
// both words, as one at 4 GiB has a low word of 0. Another process's
// limits are already refused above.
func coreLimitRules() []rule {
	core := cond{arg: 1, op: equal, value: unix.RLIMIT_CORE}
	return []rule{
		{name: "setrlimit(RLIMIT_CORE)", nr: unix.SYS_SETRLIMIT, conds: []cond{{arg: 0, op: equal, value: unix.RLIMIT_CORE}}, action: retErrno(0)},
		{name: "prlimit64(RLIMIT_CORE, new)", nr: unix.SYS_PRLIMIT64, conds: []cond{core, {arg: 2, op: anyBits, value: 0xffffffff}}, action: retErrno(0)},
		{name: "prlimit64(RLIMIT_CORE, new above 4 GiB)", nr: unix.SYS_PRLIMIT64, conds: []cond{core, {arg: 2, op: anyBits, value: 0xffffffff, high: true}}, action: retErrno(0)},
	}
}

// hugeTLBRules keep the program out of the host's hugetlb pool
// (vm.nr_hugepages, reserved for the host's databases and VMs), which
// neither RLIMIT_DATA nor the v1 memory group counts: a sandbox took every
// page of it. Each answer is what a kernel that gives no huge pages says:
// mmap and shmget EPERM (as without hugetlb_shm_group), memfd_create
// EINVAL (as without hugetlbfs). Programs that ask (a JVM with large
// pages, PostgreSQL's huge_pages=try) fall back to normal pages.
func hugeTLBRules() []rule {
	return []rule{
		{name: "mmap(MAP_HUGETLB)", nr: unix.SYS_MMAP, conds: []cond{{arg: 3, op: anyBits, value: unix.MAP_HUGETLB}}, action: retErrno(unix.EPERM)},
		{name: "shmget(SHM_HUGETLB)", nr: unix.SYS_SHMGET, conds: []cond{{arg: 2, op: anyBits, value: shmHugeTLB}}, action: retErrno(unix.EPERM)},
		{name: "memfd_create(MFD_HUGETLB)", nr: unix.SYS_MEMFD_CREATE, conds: []cond{{arg: 1, op: anyBits, value: unix.MFD_HUGETLB}}, action: retErrno(unix.EINVAL)},
	}
}

// shmHugeTLB is SHM_HUGETLB (linux/shm.h), which x/sys/unix does not name.
const shmHugeTLB = 0o4000

// pageCacheRules withhold whether a host process read a host file bound
// into the sandbox (/usr, /etc/ssl/certs, the integration folder): the
// program evicted its pages (fadvise DONTNEED) and asked without blocking
// whether they were back (preadv2 RWF_NOWAIT answers EAGAIN when they are
// not), every 250 ms: the signal inotify's refusal withholds. A read or
// write that must not block is EOPNOTSUPP, what a file that cannot do it
// answers, on which programs do the plain call. The evictions, hints by
// their nature, succeed and do nothing: fadvise DONTNEED, madvise and
// process_madvise MADV_COLD and MADV_PAGEOUT (the kernel lets the latter
// two evict only files the caller may write, which a normal user's
// sandbox may own). cachestat, which reports a file's cached pages, is
// ENOSYS, as before Linux 6.5. mincore stays: since Linux 5.0 it reports
// a file's pages only to a caller who may write the file, and runtimes
// use it on their own memory.
func pageCacheRules() []rule {
	var rules []rule
	for _, nr := range []uint32{unix.SYS_PREADV2, unix.SYS_PWRITEV2} {
		rules = append(rules, rule{name: "preadv2/pwritev2(RWF_NOWAIT)", nr: nr, conds: []cond{{arg: 5, op: anyBits, value: unix.RWF_NOWAIT}},
			action: retErrno(unix.EOPNOTSUPP)})
	}
	rules = append(rules, rule{name: "fadvise64(DONTNEED)", nr: unix.SYS_FADVISE64, conds: []cond{{arg: 3, op: equal, value: fadvDontNeed}}, action: retErrno(0)})
	for _, advice := range []uint32{unix.MADV_COLD, unix.MADV_PAGEOUT} {
		rules = append(rules,
			rule{name: "madvise(COLD, PAGEOUT)", nr: unix.SYS_MADVISE, conds: []cond{{arg: 2, op: equal, value: advice}}, action: retErrno(0)},
			rule{name: "process_madvise(COLD, PAGEOUT)", nr: unix.SYS_PROCESS_MADVISE, conds: []cond{{arg: 3, op: equal, value: advice}}, action: retErrno(0)})
	}
	// KSM opt-in, per process or per range: merged pages are shared with
	// other processes' identical ones, and the time a write takes tells
	// whether they were. EINVAL is what a kernel without KSM answers.
	rules = append(rules,
		rule{name: "prctl(PR_SET_MEMORY_MERGE)", nr: unix.SYS_PRCTL, conds: []cond{{arg: 0, op: equal, value: unix.PR_SET_MEMORY_MERGE}}, action: retErrno(unix.EINVAL)},
		rule{name: "madvise(MERGEABLE)", nr: unix.SYS_MADVISE, conds: []cond{{arg: 2, op: equal, value: unix.MADV_MERGEABLE}}, action: retErrno(unix.EINVAL)})
	return append(rules, rule{name: "cachestat", nr: unix.SYS_CACHESTAT, action: retErrno(unix.ENOSYS)})
}

// fadvDontNeed is POSIX_FADV_DONTNEED on amd64 and arm64.
const fadvDontNeed = 4

// socketpairRule holds socketpair to AF_UNIX, as socket is held to
// allowedFamilies (the other two make no pairs): the kernel looks up, and
// loads on demand, the module of any family it is asked for.
func socketpairRule() rule {
	return rule{name: "socketpair(other families)", nr: unix.SYS_SOCKETPAIR, conds: []cond{{arg: 0, op: notEqual, value: unix.AF_UNIX}},
		action: retErrno(unix.EAFNOSUPPORT)}
}

// shmLock is SHM_LOCK (linux/shm.h), which x/sys/unix does not name.
const shmLock = 11

// setsidRule refuses a new session, with the errno a process group leader
// gets: each session is a scheduler group of its own (autogroup), with a
// CPU share of its own, and where no cgroup bounds the sandbox's CPU, the
// sandbox's one session is its bound.
var setsidRule = rule{name: "setsid", nr: unix.SYS_SETSID, action: retErrno(unix.EPERM)}

// sortedKeys keeps the assembled program the same from run to run.
func sortedKeys(m map[string]uint32) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// assemble compiles rules for the native architecture: kill a foreign
// ABI, then test each rule in order, then allow.
func assemble(rules []rule) ([]bpf.RawInstruction, error) {
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nativeArch, SkipTrue: 1},
		bpf.RetConstant{Val: retKill},
	}
	if hasX32 {
		prog = append(prog,
			bpf.LoadAbsolute{Off: offNr, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: x32SyscallBit, SkipFalse: 1},
			bpf.RetConstant{Val: retKill},
		)
	}
	for _, r := range rules {
		prog = append(prog, ruleBlock(r)...)
	}
	prog = append(prog, bpf.RetConstant{Val: retAllow})
	return bpf.Assemble(prog)
}

// ruleBlock is one rule: each test jumps past the block when it fails,
// and the block ends in the rule's action. Conditions load the argument's
// low 32-bit word only.
func ruleBlock(r rule) []bpf.Instruction {
	n := 2 + 2*len(r.conds) + 1 // load nr, test; load arg, test per condition; return
	for _, c := range r.conds {
		if c.op == maskedEqual {
			n++ // and the mask
		}
	}
	var b []bpf.Instruction
	skip := func() uint8 { return uint8(n - len(b) - 1) } // from the next instruction to past the block
	b = append(b, bpf.LoadAbsolute{Off: offNr, Size: 4})
	b = append(b, bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.nr, SkipFalse: skip()})
	for _, c := range r.conds {
		off := argLow(c.arg)
		if c.high {
			off += 4
		}
		b = append(b, bpf.LoadAbsolute{Off: off, Size: 4})
		switch c.op {
		case equal:
			b = append(b, bpf.JumpIf{Cond: bpf.JumpEqual, Val: c.value, SkipFalse: skip()})
		case notEqual:
			b = append(b, bpf.JumpIf{Cond: bpf.JumpEqual, Val: c.value, SkipTrue: skip()})
		case anyBits:
			b = append(b, bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: c.value, SkipFalse: skip()})
		case maskedEqual:
			b = append(b, bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: c.mask})
			b = append(b, bpf.JumpIf{Cond: bpf.JumpEqual, Val: c.value, SkipFalse: skip()})
		}
	}
	return append(b, bpf.RetConstant{Val: r.action})
}

// argLow is the offset of the low 32 bits of argument i (little-endian:
// the first word).
func argLow(i int) uint32 { return offArgs + 8*uint32(i) }

// installSeccomp loads the baseline filter, and the setsid rule unless
// allowSetsid, on the calling thread only (no TSYNC): the init's other
// threads need mount and friends no more, and the target inherits this
// thread's filter. no_new_privs is already set.
func installSeccomp(allowSetsid bool) error {
	rules := baselineRules()
	if !allowSetsid {
		rules = append(rules, setsidRule)
	}
	raw, err := assemble(rules)
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, ins := range raw {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return nil
}
