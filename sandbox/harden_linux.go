package sandbox

import (
	"errors"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// Securebits (linux/securebits.h): uid 0 gains nothing at execve, and none
// of this can be undone.
const (
	secbitNoroot               = 1 << 0
	secbitNorootLocked         = 1 << 1
	secbitNoSetuidFixup        = 1 << 2
	secbitNoSetuidFixupLocked  = 1 << 3
	secbitKeepCapsLocked       = 1 << 5
	secbitNoCapAmbientRaise    = 1 << 6
	secbitNoCapAmbientRaiseLkd = 1 << 7
)

// dropPrivileges empties this thread's capability bounding set, clears the
// ambient set, locks the securebits so that being uid 0 inside the user
// namespace grants nothing at execve, drops every capability and sets
// no_new_privs. Capabilities are per thread: the caller has locked it.
func dropPrivileges() error {
	for c := 0; ; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) { // past the last capability
				break
			}
			return err
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return err
	}
	bits := secbitNoroot | secbitNorootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLocked |
		secbitKeepCapsLocked | secbitNoCapAmbientRaise | secbitNoCapAmbientRaiseLkd
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bits), 0, 0, 0); err != nil {
		return err
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return err
	}
	return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
}

// namespaceFlags are the clone/unshare flags that make a new namespace.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWTIME

// baselineFilter is the mandatory seccomp filter. It denies (EPERM) what
// could undo the sandbox or reach around it: new namespaces and joining
// others, io_uring (which bypasses seccomp for its operations), tracing and
// other processes' memory, BPF, perf, userfaultfd, the kernel keyring,
// TIOCSTI (typing into a terminal), and packet, vsock and non-route netlink
// sockets. clone3 gets ENOSYS, so libcs fall back to clone, whose flags a
// filter can see.
func baselineFilter() seccomp.Filter {
	eq := func(arg uint32, v uint64) seccomp.Condition {
		return seccomp.Condition{Argument: arg, Operation: seccomp.Equal, Value: v}
	}
	return seccomp.Filter{
		NoNewPrivs: true,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls: []seccomp.SyscallGroup{
				{
					Action: seccomp.ActionErrno,
					Names: []string{"setns", "io_uring_setup", "io_uring_enter", "io_uring_register", "ptrace",
						"process_vm_readv", "process_vm_writev", "bpf", "perf_event_open", "userfaultfd",
						"keyctl", "add_key", "request_key", "mount", "umount2", "pivot_root", "chroot",
						"open_tree", "move_mount", "fsopen", "fsmount", "fsconfig", "kexec_load", "init_module", "finit_module"},
					NamesWithCondtions: []seccomp.NameWithConditions{
						{Name: "unshare", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: namespaceFlags}}},
						{Name: "clone", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: namespaceFlags}}},
						{Name: "ioctl", Conditions: seccomp.ArgumentConditions{eq(1, unix.TIOCSTI)}},
						{Name: "socket", Conditions: seccomp.ArgumentConditions{eq(0, unix.AF_PACKET)}},
						{Name: "socket", Conditions: seccomp.ArgumentConditions{eq(0, unix.AF_VSOCK)}},
						{Name: "socket", Conditions: seccomp.ArgumentConditions{eq(0, unix.AF_NETLINK), {Argument: 2, Operation: seccomp.NotEqual, Value: unix.NETLINK_ROUTE}}},
					},
				},
				{
					Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS),
					Names:  []string{"clone3"},
				},
			},
		},
	}
}

// installSeccomp loads the baseline filter on the calling thread only (no
// TSYNC): the init's other threads need mount and friends no more, and the
// target inherits this thread's filter.
func installSeccomp() error { return seccomp.LoadFilter(baselineFilter()) }
