package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/egressd/egressd/sandbox"
)

// TestRunSocketOptionMemoryCannotExceedTheSandboxsBound: the kernel
// allocates socket options with sock_kmalloc, charged to no memory cgroup
// and bounded only by net.core.optmem_max (128 KiB) a socket; unbound
// sockets are counted by no socket watch. 8 processes of 1,000 sockets,
// each filled with TCP_MD5SIG keys, took 1,471 MB of host slab with the
// sandbox's group at 33 MB. TCP_MD5SIG and TCP-AO keys are refused as a
// kernel without them refuses them, and the sandbox's optmem_max bounds
// what every other option may hold. The probe's 900 sockets, each
// filled with keys, may grow the
// host's Slab by no more than the bound the config gives them, with
// headroom for the rest of a shared machine (the attack took 112 MB).
func TestRunSocketOptionMemoryCannotExceedTheSandboxsBound(t *testing.T) {
	e := newSandboxEnv(t)
	const socks = 900
	out, errs, code := runCmd(t, e.configuredProbe("", "optmem", fmt.Sprint(socks)))
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, out, errs)
	}
	wantLines(t, out, fmt.Sprintf("optmem_max %d", sandbox.OptMemBytes),
		"TCP_MD5SIG: ENOPROTOOPT, TCP_AO_ADD_KEY: ENOPROTOOPT", "IPv6 routing header of 2 segments: ok, of 127: ENOBUFS")
	if want := fmt.Sprintf("socket options 1 KiB a socket, %d MB in all, TCP keys refused", sandbox.DefaultLimits.SocketOptionMB()); !strings.Contains(e.auditLog(), want) {
		t.Errorf("the audit log does not state the bound (%q):\n%s", want, e.auditLog())
	}
	var made, keys, grewKiB int
	line := out[strings.Index(out, "sockets "):]
	if _, err := fmt.Sscanf(line, "sockets %d md5 keys %d slab grew %d KiB", &made, &keys, &grewKiB); err != nil || made != socks {
		t.Fatalf("%v:\n%s", err, out)
	}
	// Each socket: optmem_max twice over (kmalloc rounds a small request up
	// to its slab size), and the socket itself, a few KiB; headroom for
	// what the rest of the machine allocates meanwhile.
	const socketKiB, headroomKiB = 8, 48 << 10
	bound := socks*(2*sandbox.OptMemBytes>>10+socketKiB) + headroomKiB
	if keys != 0 || grewKiB > bound {
		t.Errorf("%d sockets took %d TCP_MD5SIG keys and grew the host's Slab by %d KiB, past the bound of %d KiB:\n%s", made, keys, grewKiB, bound, out)
	}
}

// TestRunSocketsCannotLeaveByAnInterfaceTheyName is round 52's lobind.sh:
// SO_BINDTODEVICE "lo" (or IP_UNICAST_IF, IP_MULTICAST_IF and their IPv6
// forms) sent datagrams and SYNs to any address out of lo, past the
// default route through egress0, and no audit line named them. Each
// option that names an outgoing interface is refused.
func TestRunSocketsCannotLeaveByAnInterfaceTheyName(t *testing.T) {
	e := newSandboxEnv(t)
	out, errs, code := runCmd(t, e.configuredProbe("", "ifbind"))
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, out, errs)
	}
	wantLines(t, out, "SO_BINDTODEVICE: EPERM, SO_BINDTOIFINDEX: EPERM, IP_UNICAST_IF: EPERM, IP_MULTICAST_IF: EPERM, IPV6_UNICAST_IF: EPERM, IPV6_MULTICAST_IF: EPERM")
}
