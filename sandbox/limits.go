package sandbox

import (
	"fmt"
	"os"
)

// Limits bound what one sandbox can take from its host. The kernel holds
// each one: rlimits the init sets before the target starts (inherited by
// every descendant, and not raisable without CAP_SYS_RESOURCE in the
// initial user namespace), and sizes of the tmpfs mounts.
type Limits struct {
	// Processes is RLIMIT_NPROC. The kernel counts it per user namespace
	// and uid (ucounts), so it caps the tasks (processes and threads) of
	// this sandbox, the init's own threads included, whatever host uid it
	// maps to.
	Processes int
	// OpenFiles is RLIMIT_NOFILE: descriptors per process.
	OpenFiles int
	// MemoryMB is RLIMIT_DATA: private writable memory (heap, anonymous
	// mappings) per process. RLIMIT_AS would break runtimes that reserve
	// large address ranges they never touch (V8, WebAssembly).
	MemoryMB int
	// FileSizeMB is RLIMIT_FSIZE: the largest file any process writes, in
	// the state folder or a tmpfs.
	FileSizeMB int
	// TmpMB and HomeMB size the /tmp and HOME tmpfs; TmpfsInodes caps the
	// files in each.
	TmpMB, HomeMB, TmpfsInodes int
	// StateMB sizes root's state image (MountStateImage); the kernel holds
	// it. A normal user's state folder is only checked (CheckState): a run
	// does not start while it holds more, and within a run only FileSizeMB
	// bounds what the program writes there, per file.
	StateMB int
	// TotalMemoryMB bounds the memory of the whole sandbox, the kernel
	// memory its processes make the kernel allocate included (the
	// sandbox's cgroup: memory.max; on v1 memory.limit_in_bytes plus
	// memory.kmem.tcp.limit_in_bytes, which add up to it, see v1TCPBytes).
	TotalMemoryMB int
	// CPUs is the CPU time the whole sandbox may use, in CPUs (the
	// cgroup's CFS quota per period).
	CPUs float64
}

// Kernel objects the kernel counts per user and charges up the chain of
// user namespaces (ucounts): without bounds of the sandbox's own, a child
// takes its launcher's host-wide quota (pending signals, inotify, fanotify)
// from every process of that uid. Fixed, small but far above what a program
// needs.
const (
	// PendingSignals is RLIMIT_SIGPENDING: queued signals for the whole
	// sandbox (counted per user namespace and uid, like RLIMIT_NPROC).
	PendingSignals = 1024
	// The per-user-namespace limits (user.max_inotify_instances and the
	// rest) the init sets in the sandbox's user namespace.
	InotifyInstances = 16
	InotifyWatches   = 8192
	FanotifyGroups   = 8
	FanotifyMarks    = 8192
	// StackMB and StackHardMB are RLIMIT_STACK, soft and hard: the main
	// stack's growth, which RLIMIT_DATA does not count. The hard bound
	// leaves a program room to raise its own, as deep recursion needs.
	StackMB     = 8
	StackHardMB = 64
	// Nice is the nice value the program starts at. RLIMIT_NICE and
	// RLIMIT_RTPRIO are 0: no process in the sandbox lowers it, or takes
	// a real-time class. Where no cgroup bounds the sandbox's CPU, the
	// kernel's autogroup does, one group per session: the sandbox is one
	// session and may not start another (Spec.AllowSetsid).
	Nice = 10
	// CoreLimit is RLIMIT_CORE, soft and hard, in bytes: the one value
	// on which the kernel writes no core file and starts no core_pattern
	// helper either.
	CoreLimit = 1
	// OptMemBytes is net.core.optmem_max in the sandbox's namespace
	// (optMemMax): the most option memory one socket holds, so the
	// sandbox holds at most Processes x OpenFiles of it, 256 MiB at the
	// defaults, a quarter of TotalMemoryMB. 1 KiB still takes what
	// programs set: SCM_RIGHTS of up to 250 descriptors in one message
	// (16 + 4 a descriptor), a socket filter of about 100 instructions,
	// 20 IPv4 multicast memberships (the kernel's own default cap, about
	// 48 bytes each), IP options (40 bytes), an IPv6 routing header of a
	// few segments. Past it the kernel answers ENOBUFS or ENOMEM, as it
	// does past the host's own bound. MSG_ZEROCOPY holds one notification
	// at a time, and falls back to copying.
	OptMemBytes = 1024
	// Somaxconn is net.core.somaxconn in the sandbox's namespace, set
	// after egressd's listeners: the longest accept queue a program's
	// listener holds (the host's 4,096 let one listener queue 4,096
	// connections between two of socketWatch's counts). Go and Python ask
	// for somaxconn, Node for 511, and the kernel clamps each silently; a
	// burst past it waits for a SYN retransmission, not an error. 64 is
	// what one program serving itself needs, and 64 connections of 256
	// KiB, 16 MB, is the most one listener can queue unseen.
	Somaxconn = 64
	// TCPBufferBound says what tcpBuffers sets, for the audit log.
	TCPBufferBound = "256 KiB per socket each way (tcp_rmem, tcp_wmem)"
)

// A connection the program has not accepted is charged to no cgroup
// (boundConnections), so the sandbox's TCP connections are counted instead:
// at most TCPConnections at once, so many that, each holding a full
// receive queue (tcpBuffers) and its socket, they take no more than
// unacceptedShare of TotalMemoryMB outside the cgroup.
const (
	unacceptedShare = 4 // a quarter
	// connectionBytes is what one unaccepted connection can hold: a
	// full receive queue (tcp_rmem's max) and its sockets.
	connectionBytes = 256<<10 + 8<<10
	// MinTCPConnections is the count allowed however small the memory
	// bound: a program needs a few connections to its proxy.
	MinTCPConnections = 16
)

// TCPConnections is the most TCP connections the sandbox holds at once.
func (l Limits) TCPConnections() int {
	return max(MinTCPConnections, (l.TotalMemoryMB<<20)/unacceptedShare/connectionBytes)
}

// socketSlack covers the sockets the connection bound does not come from:
// egressd's own listeners in the namespace and connections still closing.
const socketSlack = 64

// socketLimit is the most TCP sockets in use the sandbox may hold: both
// ends of each connection it may make, in the namespace (loopback, and the
// proxy's accepted ends), and socketSlack.
func socketLimit(connections int) int { return 2*connections + socketSlack }

// TCPSockets is the most TCP sockets in use past which the init kills the
// sandbox (socketWatch).
func (l Limits) TCPSockets() int { return socketLimit(l.TCPConnections()) }

// SocketOptionMB is the most socket option memory the sandbox holds, in
// MiB, which the kernel charges to no cgroup: OptMemBytes on each socket
// every process may open.
func (l Limits) SocketOptionMB() int { return l.Processes * l.OpenFiles * OptMemBytes >> 20 }

// TCPQueued is the most connections the sandbox's listeners may hold in
// their accept queues past which the init kills the sandbox
// (socketWatch): a queued connection is a connection, and socketSlack
// covers conntrack's drift and egressd's own listeners.
func (l Limits) TCPQueued() int { return l.TCPConnections() + socketSlack }

// DefaultLimits are the bounds when the operator sets none.
var DefaultLimits = Limits{Processes: 256, OpenFiles: 1024, MemoryMB: 1024, FileSizeMB: 256, TmpMB: 64, HomeMB: 64, TmpfsInodes: 16384, StateMB: 1024,
	TotalMemoryMB: 1024, CPUs: 1}

// MinCPUs and MaxCPUs bound Limits.CPUs: the kernel takes no CFS quota
// under 1 ms a period, and more than this many CPUs is no bound.
const (
	MinCPUs = 0.01
	MaxCPUs = 1024
)

// check refuses a Limits with any bound unset: a zero would mean "no
// bound" to some of the calls below, and nothing fails open.
func (l Limits) check() error {
	for name, v := range map[string]int{"processes": l.Processes, "open files": l.OpenFiles, "memory": l.MemoryMB,
		"file size": l.FileSizeMB, "/tmp size": l.TmpMB, "HOME size": l.HomeMB, "tmpfs inodes": l.TmpfsInodes, "state size": l.StateMB,
		"total memory": l.TotalMemoryMB} {
		if v < 1 {
			return fmt.Errorf("limit on %s is %d: every bound must be at least 1", name, v)
		}
	}
	if !(l.CPUs >= MinCPUs && l.CPUs <= MaxCPUs) {
		return fmt.Errorf("limit on CPUs is %v: it must be from %v to %v", l.CPUs, MinCPUs, MaxCPUs)
	}
	return nil
}

// cpuPeriodUS is the CFS period; the quota is CPUs of it.
const cpuPeriodUS = 100000

// cpuQuotaUS is the CFS quota per cpuPeriodUS that CPUs allows.
func (l Limits) cpuQuotaUS() int { return int(l.CPUs*cpuPeriodUS + 0.5) }

// tmpfsOptions are the mount options of a writable tmpfs of sizeMB.
func (l Limits) tmpfsOptions(sizeMB int) string {
	return fmt.Sprintf("mode=0777,size=%dm,nr_inodes=%d", sizeMB, l.TmpfsInodes)
}

// CheckState refuses to start a run while the state folder holds more than
// StateMB: what an earlier run left is bounded across runs, though not
// within one.
func (l Limits) CheckState(use StateUse) error {
	if use.Bytes > int64(l.StateMB)<<20 {
		return fmt.Errorf("the state folder holds %d MB in %d files, over sandbox_limits.state_mb (%d MB): "+
			"the operator must clear it, or raise the bound, before the integration runs again", use.Bytes>>20, use.Files, l.StateMB)
	}
	return nil
}

// SharedUserQuotas are the kernel's per-user quotas that no bound of the
// sandbox's own holds: the kernel counts them per host uid (user_struct),
// not per user namespace, so a sandbox that runs as its launcher's uid (a
// normal user's launch: an unprivileged user namespace maps only that uid)
// shares them with every process of that user, and may take them whole.
// As root the sandbox runs as a uid of its own and has them to itself.
const SharedUserQuotas = "epoll watches (fs.epoll.max_user_watches), descriptors in flight on unix sockets " +
	"(bounded by the sender's RLIMIT_NOFILE) and pipe buffers (fs.pipe-user-pages-soft)"

// SharesLaunchersUID says whether a sandbox whose root maps to hostUID
// runs as its launcher's own uid, and so shares SharedUserQuotas with it.
func SharesLaunchersUID(hostUID int) bool { return hostUID == os.Geteuid() }
