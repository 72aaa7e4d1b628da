package sandbox

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// These tests run the assembled filter in golang.org/x/net/bpf's
// interpreter. That interpreter loads 32-bit words big-endian (network
// order) where the kernel loads seccomp_data in native order, so input()
// writes each 32-bit word big-endian at the offset the kernel would put it
// at: the filter sees the values the kernel would show it.

type call struct {
	arch uint32
	nr   uint32
	args [6]uint64
}

func input(c call) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[offNr:], c.nr)
	binary.BigEndian.PutUint32(b[offArch:], c.arch)
	for i, a := range c.args {
		binary.BigEndian.PutUint32(b[argLow(i):], uint32(a))
		binary.BigEndian.PutUint32(b[argLow(i)+4:], uint32(a>>32))
	}
	return b
}

func baselineVM(t *testing.T) *bpf.VM {
	t.Helper()
	raw, err := assemble(baselineRules())
	if err != nil {
		t.Fatal(err)
	}
	prog, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("the filter does not disassemble")
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

func run(t *testing.T, vm *bpf.VM, c call) uint32 {
	t.Helper()
	v, err := vm.Run(input(c))
	if err != nil {
		t.Fatal(err)
	}
	return uint32(v)
}

// matching is a call that meets every condition of r.
func matching(r rule) call {
	c := call{arch: nativeArch, nr: r.nr}
	for _, cd := range r.conds {
		switch cd.op {
		case equal, anyBits:
			c.args[cd.arg] = uint64(cd.value)
		case maskedEqual:
			c.args[cd.arg] = uint64(cd.value | 0x3a&^cd.mask) // a number inside the range
		case notEqual:
			c.args[cd.arg] = 0x7ead // in no list
		}
	}
	return c
}

const highBits = 0xffffffff_00000000

// TestSeccompHighArgumentBitsDoNotBypassAnyRule: every rule the filter
// names, with bits above 32 set in every argument (which the kernel
// ignores for an int), still gets its action.
func TestSeccompHighArgumentBitsDoNotBypassAnyRule(t *testing.T) {
	vm := baselineVM(t)
	for _, r := range baselineRules() {
		c := matching(r)
		if got := run(t, vm, c); got != r.action {
			t.Errorf("%s: %#x, want %#x", r.name, got, r.action)
		}
		for bit := 32; bit < 64; bit += 31 {
			hi := c
			for i := range hi.args {
				hi.args[i] |= 1 << bit
			}
			if got := run(t, vm, hi); got != r.action {
				t.Errorf("%s with bit %d set in every argument: %#x, want %#x", r.name, bit, got, r.action)
			}
		}
		hi := c
		for i := range hi.args {
			hi.args[i] |= highBits
		}
		if got := run(t, vm, hi); got != r.action {
			t.Errorf("%s with the high words all ones: %#x, want %#x", r.name, got, r.action)
		}
	}
}

// TestSeccompNamedAttacksAreRefused are the calls the adversarial review
// made, as the kernel would see them.
func TestSeccompNamedAttacksAreRefused(t *testing.T) {
	vm := baselineVM(t)
	eperm, noaf := retErrno(unix.EPERM), retErrno(unix.EAFNOSUPPORT)
	for _, tc := range []struct {
		name string
		c    call
		want uint32
	}{
		{"socket(AF_VSOCK|1<<32)", call{nativeArch, unix.SYS_SOCKET, [6]uint64{unix.AF_VSOCK | 1<<32, unix.SOCK_STREAM}}, noaf},
		{"socket(AF_NETLINK|1<<32, NETLINK_KOBJECT_UEVENT)", call{nativeArch, unix.SYS_SOCKET, [6]uint64{unix.AF_NETLINK | 1<<32, unix.SOCK_RAW, unix.NETLINK_KOBJECT_UEVENT}}, noaf},
		{"socket(AF_NETLINK, NETLINK_ROUTE)", call{nativeArch, unix.SYS_SOCKET, [6]uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE}}, noaf},
		{"socket(AF_PACKET|1<<32)", call{nativeArch, unix.SYS_SOCKET, [6]uint64{unix.AF_PACKET | 1<<32, unix.SOCK_RAW}}, noaf},
		{"socket(AF_BLUETOOTH)", call{nativeArch, unix.SYS_SOCKET, [6]uint64{unix.AF_BLUETOOTH, unix.SOCK_STREAM}}, noaf},
		{"socket(AF_INET|1<<32)", call{nativeArch, unix.SYS_SOCKET, [6]uint64{unix.AF_INET | 1<<32, unix.SOCK_STREAM}}, retAllow},
		{"socket(AF_INET6)", call{nativeArch, unix.SYS_SOCKET, [6]uint64{unix.AF_INET6, unix.SOCK_DGRAM}}, retAllow},
		{"socket(AF_UNIX)", call{nativeArch, unix.SYS_SOCKET, [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM}}, retAllow},
		{"ioctl(TIOCSTI|1<<32)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{0, unix.TIOCSTI | 1<<32}}, eperm},
		{"ioctl(TIOCLINUX|1<<63)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{0, unix.TIOCLINUX | 1<<63}}, eperm},
		{"ioctl(TCGETS)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{0, unix.TCGETS}}, retAllow},
		{"ioctl(TIOCGWINSZ)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{0, unix.TIOCGWINSZ}}, retAllow},
		{"unshare(CLONE_NEWUSER)", call{nativeArch, unix.SYS_UNSHARE, [6]uint64{unix.CLONE_NEWUSER}}, eperm},
		{"unshare(CLONE_FILES)", call{nativeArch, unix.SYS_UNSHARE, [6]uint64{unix.CLONE_FILES}}, retAllow},
		{"clone(CLONE_NEWNET|1<<32)", call{nativeArch, unix.SYS_CLONE, [6]uint64{unix.CLONE_NEWNET | 1<<32}}, eperm},
		{"clone(thread)", call{nativeArch, unix.SYS_CLONE, [6]uint64{unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND}}, retAllow},
		{"clone3", call{nativeArch, unix.SYS_CLONE3, [6]uint64{}}, retErrno(unix.ENOSYS)},
		{"personality(ADDR_NO_RANDOMIZE)", call{nativeArch, unix.SYS_PERSONALITY, [6]uint64{0x0040000 /* ADDR_NO_RANDOMIZE */}}, eperm},
		{"personality(query|1<<32)", call{nativeArch, unix.SYS_PERSONALITY, [6]uint64{0xffffffff | 1<<32}}, retAllow},
		{"pidfd_getfd", call{nativeArch, unix.SYS_PIDFD_GETFD, [6]uint64{}}, eperm},
		{"open_by_handle_at", call{nativeArch, unix.SYS_OPEN_BY_HANDLE_AT, [6]uint64{}}, eperm},
		{"getpid", call{nativeArch, unix.SYS_GETPID, [6]uint64{}}, retAllow},
		// The terminal the program is handed (the attacker's repro-pty-ctty.sh
		// and repro-vt-ctty.sh): none of these may take or steer it.
		{"ioctl(TIOCSCTTY)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{1, unix.TIOCSCTTY}}, eperm},
		{"ioctl(TIOCSCTTY|1<<32, force)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{1, unix.TIOCSCTTY | 1<<32, 1}}, eperm},
		{"ioctl(TIOCSPGRP|1<<63)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{0, unix.TIOCSPGRP | 1<<63}}, eperm},
		{"ioctl(TIOCSSOFTCAR)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{0, unix.TIOCSSOFTCAR}}, eperm},
		{"ioctl(TIOCCONS)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{0, unix.TIOCCONS}}, eperm},
		{"ioctl(TIOCVHANGUP|1<<40)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{0, unix.TIOCVHANGUP | 1<<40}}, eperm},
		{"ioctl(KDSETMODE)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{1, 0x4B3A, 1}}, eperm},
		{"ioctl(KDSKBMODE|1<<32)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{1, 0x4B45 | 1<<32, 4}}, eperm},
		{"ioctl(KDSKBSENT)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{1, 0x4B49}}, eperm},
		{"ioctl(KDSETLED)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{1, 0x4B32, 0xff}}, eperm},
		{"ioctl(KDGKBMODE)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{1, 0x4B44}}, eperm},
		{"ioctl(KDFONTOP|0xffffffff<<32)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{1, 0x4B72 | highBits}}, eperm},
		{"ioctl(VT_ACTIVATE)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{1, 0x5606, 2}}, eperm},
		{"ioctl(VT_LOCKSWITCH|1<<32)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{1, 0x560B | 1<<32}}, eperm},
		{"ioctl(VT_SETMODE)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{1, 0x5602}}, eperm},
		{"ioctl(VIDIOC_QUERYCAP), V4L2's 'V'", call{nativeArch, unix.SYS_IOCTL, [6]uint64{3, 0x80685600}}, retAllow},
		// A serial line the program is handed (the attacker's repro_tiocsserial.sh).
		{"ioctl(TIOCSSERIAL|1<<32)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{0, unix.TIOCSSERIAL | 1<<32}}, eperm},
		{"ioctl(TIOCSRS485)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{0, unix.TIOCSRS485}}, eperm},
		{"ioctl(TIOCSISO7816|1<<63)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{0, unix.TIOCSISO7816 | 1<<63}}, eperm},
		{"ioctl(TIOCSLCKTRMIOS)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{0, unix.TIOCSLCKTRMIOS}}, eperm},
		{"ioctl(TIOCSIG|1<<32, SIGINT)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{0, unix.TIOCSIG | 1<<32, 2}}, eperm},
		{"ioctl(TIOCPKT)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{0, unix.TIOCPKT}}, eperm},
		{"ioctl(TIOCGSERIAL)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{0, unix.TIOCGSERIAL}}, retAllow},
		{"ioctl(TIOCNOTTY)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{0, unix.TIOCNOTTY}}, retAllow},
		{"ioctl(TIOCGPGRP)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{0, unix.TIOCGPGRP}}, retAllow},
		{"ioctl(FIONBIO)", call{nativeArch, unix.SYS_IOCTL, [6]uint64{0, 0x5421 /* FIONBIO */}}, retAllow},
		// prlimit64 (the attacker's repro-prlimit-init.sh): only the caller's own.
		{"prlimit64(1, RLIMIT_CPU)", call{nativeArch, unix.SYS_PRLIMIT64, [6]uint64{1, unix.RLIMIT_CPU, 0x1000}}, eperm},
		{"prlimit64(1|1<<32)", call{nativeArch, unix.SYS_PRLIMIT64, [6]uint64{1 | 1<<32, unix.RLIMIT_CPU, 0x1000}}, eperm},
		{"prlimit64(0, RLIMIT_NOFILE), glibc's and Go's setrlimit", call{nativeArch, unix.SYS_PRLIMIT64, [6]uint64{0, unix.RLIMIT_NOFILE, 0x1000}}, retAllow},
	} {
		if got := run(t, vm, tc.c); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
}

// TestSeccompForeignArchitecturesAreKilled: any call through another ABI
// (i386 through int 0x80, AArch32, x32) kills the process, whatever its
// number: every number means another call there.
func TestSeccompForeignArchitecturesAreKilled(t *testing.T) {
	vm := baselineVM(t)
	nrs := []uint32{0, 1, unix.SYS_GETPID, 102 /* i386 socketcall */, 359 /* i386 socket */, 54 /* i386 ioctl */, 310 /* i386 unshare */}
	for _, r := range baselineRules() {
		nrs = append(nrs, r.nr)
	}
	for _, arch := range []uint32{unix.AUDIT_ARCH_X86_64, unix.AUDIT_ARCH_I386, unix.AUDIT_ARCH_AARCH64, unix.AUDIT_ARCH_ARM, 0, 0xffffffff} {
		if arch == nativeArch {
			continue
		}
		for _, nr := range nrs {
			if got := run(t, vm, call{arch: arch, nr: nr}); got != retKill {
				t.Errorf("arch %#x call %d: %#x, want kill", arch, nr, got)
			}
		}
	}
	if !hasX32 {
		return
	}
	for _, nr := range nrs {
		if got := run(t, vm, call{arch: nativeArch, nr: nr | x32SyscallBit}); got != retKill {
			t.Errorf("x32 call %d: %#x, want kill", nr, got)
		}
	}
}

// TestSeccompHostPoolRulesLeaveOrdinaryCallsAlone: the rules that keep a
// program out of the host's shared pools refuse a stack mapping, SHM_LOCK
// and (unless allowed) setsid, and let every ordinary mapping, other
// shmctl commands and, where allowed, setsid through.
func TestSeccompHostPoolRulesLeaveOrdinaryCallsAlone(t *testing.T) {
	raw, err := assemble(append(baselineRules(), setsidRule))
	if err != nil {
		t.Fatal(err)
	}
	prog, _ := bpf.Disassemble(raw)
	denying, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	private := uint64(unix.MAP_PRIVATE | unix.MAP_ANONYMOUS)
	for _, tc := range []struct {
		name string
		vm   *bpf.VM
		c    call
		want uint32
	}{
		{"mmap(private)", denying, call{nr: unix.SYS_MMAP, args: [6]uint64{3: private}}, retAllow},
		{"mmap(MAP_STACK)", denying, call{nr: unix.SYS_MMAP, args: [6]uint64{3: private | unix.MAP_STACK | unix.MAP_NORESERVE}}, retAllow},
		{"mmap(shared file)", denying, call{nr: unix.SYS_MMAP, args: [6]uint64{3: unix.MAP_SHARED, 4: 3}}, retAllow},
		{"mmap(MAP_GROWSDOWN)", denying, call{nr: unix.SYS_MMAP, args: [6]uint64{3: private | unix.MAP_GROWSDOWN}}, retErrno(unix.EPERM)},
		{"mremap", denying, call{nr: unix.SYS_MREMAP}, retErrno(unix.ENOMEM)},
		{"shmctl(IPC_RMID)", denying, call{nr: unix.SYS_SHMCTL, args: [6]uint64{1: unix.IPC_RMID}}, retAllow},
		{"shmctl(SHM_UNLOCK)", denying, call{nr: unix.SYS_SHMCTL, args: [6]uint64{1: 12}}, retAllow},
		{"shmctl(SHM_LOCK)", denying, call{nr: unix.SYS_SHMCTL, args: [6]uint64{1: shmLock}}, retErrno(unix.EPERM)},
		{"io_setup", denying, call{nr: unix.SYS_IO_SETUP}, retErrno(unix.ENOSYS)},
		{"setsid", denying, call{nr: unix.SYS_SETSID}, retErrno(unix.EPERM)},
		{"setsid allowed", baselineVM(t), call{nr: unix.SYS_SETSID}, retAllow},
	} {
		tc.c.arch = nativeArch
		if got := run(t, tc.vm, tc.c); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
}

// TestSeccompCoreLimitCannotBeLoweredToWhereAPipeDumps: a program that set
// RLIMIT_CORE back to 0 would have its crash piped to the host's core
// helper; setting it is a no-op success whichever word of the new limit's
// pointer is set, reading it and every other limit stays.
func TestSeccompCoreLimitCannotBeLoweredToWhereAPipeDumps(t *testing.T) {
	vm := baselineVM(t)
	for _, tc := range []struct {
		name string
		c    call
		want uint32
	}{
		{"setrlimit(CORE)", call{nr: unix.SYS_SETRLIMIT, args: [6]uint64{0: unix.RLIMIT_CORE, 1: 0x7ffd0000}}, retErrno(0)},
		{"setrlimit(CORE|1<<32)", call{nr: unix.SYS_SETRLIMIT, args: [6]uint64{0: 1<<32 | unix.RLIMIT_CORE, 1: 0x7ffd0000}}, retErrno(0)},
		{"prlimit64(CORE, new)", call{nr: unix.SYS_PRLIMIT64, args: [6]uint64{1: unix.RLIMIT_CORE, 2: 0x7ffd0000}}, retErrno(0)},
		{"prlimit64(CORE, new at 4 GiB)", call{nr: unix.SYS_PRLIMIT64, args: [6]uint64{1: unix.RLIMIT_CORE, 2: 1 << 32}}, retErrno(0)},
		{"prlimit64(CORE|1<<32, new)", call{nr: unix.SYS_PRLIMIT64, args: [6]uint64{1: 1<<32 | unix.RLIMIT_CORE, 2: 1 << 40}}, retErrno(0)},
		{"prlimit64(CORE, read only)", call{nr: unix.SYS_PRLIMIT64, args: [6]uint64{1: unix.RLIMIT_CORE, 3: 0x7ffd0000}}, retAllow},
		{"prlimit64(NOFILE, new)", call{nr: unix.SYS_PRLIMIT64, args: [6]uint64{1: unix.RLIMIT_NOFILE, 2: 0x7ffd0000}}, retAllow},
		{"setrlimit(NOFILE)", call{nr: unix.SYS_SETRLIMIT, args: [6]uint64{0: unix.RLIMIT_NOFILE, 1: 0x7ffd0000}}, retAllow},
	} {
		tc.c.arch = nativeArch
		if got := run(t, vm, tc.c); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
}

// TestSeccompHugePagesAndPageCacheRulesLeaveOrdinaryCallsAlone: the rules
// that keep the program out of the hugetlb pool, the host's page cache
// state and other socket families refuse only those flags and values.
func TestSeccompHugePagesAndPageCacheRulesLeaveOrdinaryCallsAlone(t *testing.T) {
	vm := baselineVM(t)
	private := uint64(unix.MAP_PRIVATE | unix.MAP_ANONYMOUS)
	for _, tc := range []struct {
		name string
		c    call
		want uint32
	}{
		{"mmap(MAP_HUGETLB|MAP_HUGE_2MB)", call{nr: unix.SYS_MMAP, args: [6]uint64{3: private | unix.MAP_HUGETLB | 21<<26}}, retErrno(unix.EPERM)},
		{"mmap(MAP_HUGETLB|1<<32)", call{nr: unix.SYS_MMAP, args: [6]uint64{3: 1<<32 | private | unix.MAP_HUGETLB}}, retErrno(unix.EPERM)},
		{"mmap(MAP_NORESERVE)", call{nr: unix.SYS_MMAP, args: [6]uint64{3: private | unix.MAP_NORESERVE}}, retAllow},
		{"shmget(SHM_HUGETLB)", call{nr: unix.SYS_SHMGET, args: [6]uint64{2: unix.IPC_CREAT | shmHugeTLB}}, retErrno(unix.EPERM)},
		{"shmget", call{nr: unix.SYS_SHMGET, args: [6]uint64{2: unix.IPC_CREAT | 0o600}}, retAllow},
		{"memfd_create(MFD_HUGETLB)", call{nr: unix.SYS_MEMFD_CREATE, args: [6]uint64{1: unix.MFD_HUGETLB}}, retErrno(unix.EINVAL)},
		{"memfd_create(MFD_CLOEXEC)", call{nr: unix.SYS_MEMFD_CREATE, args: [6]uint64{1: unix.MFD_CLOEXEC}}, retAllow},
		{"preadv2(RWF_NOWAIT)", call{nr: unix.SYS_PREADV2, args: [6]uint64{5: unix.RWF_NOWAIT}}, retErrno(unix.EOPNOTSUPP)},
		{"pwritev2(RWF_NOWAIT|RWF_DSYNC)", call{nr: unix.SYS_PWRITEV2, args: [6]uint64{5: unix.RWF_NOWAIT | unix.RWF_DSYNC}}, retErrno(unix.EOPNOTSUPP)},
		{"preadv2(RWF_HIPRI)", call{nr: unix.SYS_PREADV2, args: [6]uint64{5: unix.RWF_HIPRI}}, retAllow},
		{"fadvise64(DONTNEED)", call{nr: unix.SYS_FADVISE64, args: [6]uint64{3: fadvDontNeed}}, retErrno(0)},
		{"fadvise64(WILLNEED)", call{nr: unix.SYS_FADVISE64, args: [6]uint64{3: 3}}, retAllow},
		{"madvise(PAGEOUT)", call{nr: unix.SYS_MADVISE, args: [6]uint64{2: unix.MADV_PAGEOUT}}, retErrno(0)},
		{"madvise(COLD)", call{nr: unix.SYS_MADVISE, args: [6]uint64{2: unix.MADV_COLD}}, retErrno(0)},
		{"madvise(DONTNEED)", call{nr: unix.SYS_MADVISE, args: [6]uint64{2: unix.MADV_DONTNEED}}, retAllow},
		// KSM opt-in (round 20 sandbox attacker): merged pages are shared with
		// other processes' and a write's timing tells whether they were.
		{"prctl(PR_SET_MEMORY_MERGE)", call{nr: unix.SYS_PRCTL, args: [6]uint64{0: unix.PR_SET_MEMORY_MERGE, 1: 1}}, retErrno(unix.EINVAL)},
		{"prctl(PR_SET_MEMORY_MERGE|1<<32)", call{nr: unix.SYS_PRCTL, args: [6]uint64{0: 1<<32 | unix.PR_SET_MEMORY_MERGE, 1: 1}}, retErrno(unix.EINVAL)},
		{"prctl(PR_SET_NAME)", call{nr: unix.SYS_PRCTL, args: [6]uint64{0: unix.PR_SET_NAME}}, retAllow},
		{"madvise(MERGEABLE)", call{nr: unix.SYS_MADVISE, args: [6]uint64{2: unix.MADV_MERGEABLE}}, retErrno(unix.EINVAL)},
		{"process_madvise(PAGEOUT)", call{nr: unix.SYS_PROCESS_MADVISE, args: [6]uint64{3: unix.MADV_PAGEOUT}}, retErrno(0)},
		{"process_madvise(WILLNEED)", call{nr: unix.SYS_PROCESS_MADVISE, args: [6]uint64{3: unix.MADV_WILLNEED}}, retAllow},
		{"cachestat", call{nr: unix.SYS_CACHESTAT}, retErrno(unix.ENOSYS)},
		{"socketpair(AF_UNIX)", call{nr: unix.SYS_SOCKETPAIR, args: [6]uint64{0: unix.AF_UNIX}}, retAllow},
		{"socketpair(AF_UNIX|1<<32)", call{nr: unix.SYS_SOCKETPAIR, args: [6]uint64{0: 1<<32 | unix.AF_UNIX}}, retAllow},
		{"socketpair(AF_INET)", call{nr: unix.SYS_SOCKETPAIR, args: [6]uint64{0: unix.AF_INET}}, retErrno(unix.EAFNOSUPPORT)},
		{"socketpair(AF_TIPC)", call{nr: unix.SYS_SOCKETPAIR, args: [6]uint64{0: unix.AF_TIPC}}, retErrno(unix.EAFNOSUPPORT)},
	} {
		tc.c.arch = nativeArch
		if got := run(t, vm, tc.c); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
}
