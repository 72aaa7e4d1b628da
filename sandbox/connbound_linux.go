package sandbox

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// boundConnections caps the TCP connections alive at once in the
// sandbox's network namespace at n, with conntrack's connlimit, and sends
// a reset for the SYN of any connection past it (the connect fails at
// once with ECONNREFUSED).
//
// Why a count and not a memory bound: the kernel charges a socket to a
// memory cgroup only when a program accept()s it. A connection queued on
// a listener in the sandbox and never accepted is charged to no cgroup,
// yet holds its struct sock and its receive queue in the host-wide
// tcp_mem; a program that listens, connects and closes its own end
// thousands of times (no descriptor stays open) pinned 1.36 GB of host TCP
// memory under a 5 MB group. A per-listener backlog (somaxconn) does not
// bound the total, since listeners are bounded only by descriptors times
// processes. Counting every connection the namespace makes bounds the
// unaccepted ones with the rest; tcpBuffers bounds what each one queues.
//
// Only TCP that stays in the sandbox is tracked (everything else is
// notrack at raw priority), so conntrack keeps no state for the sandbox's
// UDP, nor for what egress0 takes, and the connection
// states conntrack times out while a socket can still hold memory
// (established, close-wait) outlive any sandbox run (connTrackHold).
func boundConnections(n int) error {
	if n < 1 {
		return fmt.Errorf("connection bound %d: it must be at least 1", n)
	}
	c, err := nftables.New()
	if err != nil {
		return err
	}
	table := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "egressd"})
	raw := c.AddChain(&nftables.Chain{Name: "untracked", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityRaw})
	notrackUnless := func(chain *nftables.Chain, key expr.MetaKey, is []byte) {
		c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{
			&expr.Meta{Key: key, Register: 1},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: is},
			&expr.Notrack{},
		}})
	}
	notrackUnless(raw, expr.MetaKeyL4PROTO, []byte{unix.IPPROTO_TCP})
	// Nor what goes to or comes from egress0 (anything but lo, ifindex 1
	// in every new namespace): the bound counts only connections that stay
	// in the sandbox, and an entry for a SYN egress0 takes (reset or
	// dropped there) stayed 120 s in a table the host shares, charged to
	// no cgroup: a routing header with a new first hop per connect, whose
	// reset conntrack could not match, filled it in 8 s, 65 MB of host
	// memory per sandbox (round 55).
	notrackUnless(raw, expr.MetaKeyOIF, nativeUint32(1))
	// And by destination, as lo's tc hook decides what stays
	// (steerLoopback): a SYN can leave by lo for another address and be
	// sent on to egress0 only after this hook (a socket a failed
	// link-local connect bound to lo; a routing header whose first hop is
	// egress0's IPv6 address). Tracked and counted, egress0's reset never
	// closed its entry, and past the bound every direct connect was
	// refused here, unaudited (round 56).
	ownIPv4, ownIPv6 := egressAddr4.As4(), egressAddr6.As16()
	c.AddRule(&nftables.Rule{Table: table, Chain: raw, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4}, // destination
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: ownIPv4[:]},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{0xff, 0, 0, 0}, Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{127, 0, 0, 0}},
		&expr.Notrack{},
	}})
	for _, e := range [][]expr.Any{
		{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16}, &expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: ownIPv6[:]}},
		{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 6, Len: 1}, &expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{unix.IPPROTO_TCP}}},
	} {
		c.AddRule(&nftables.Rule{Table: table, Chain: raw, Exprs: append([]expr.Any{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV6}},
		}, append(e, &expr.Notrack{})...)})
	}
	in := c.AddChain(&nftables.Chain{Name: "untracked-in", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRaw})
	notrackUnless(in, expr.MetaKeyIIF, nativeUint32(1))
	count := c.AddChain(&nftables.Chain{Name: "connections", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter})
	c.AddRule(&nftables.Rule{Table: table, Chain: count, Exprs: []expr.Any{
		// Only connections that stay in the sandbox (they leave by lo,
		// ifindex 1 in every new namespace): one to any other address
		// goes to egress0, whose reader audits and resets it. Counted
		// and refused here, past the bound, it was refused with no audit
		// line (round 54).
		&expr.Meta{Key: expr.MetaKeyOIF, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: nativeUint32(1)},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Ct{Key: expr.CtKeySTATE, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: nativeUint32(expr.CtStateBitNEW), Xor: nativeUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: nativeUint32(0)},
		&expr.Connlimit{Count: uint32(n), Flags: expr.NFT_CONNLIMIT_F_INV},
		&expr.Reject{Type: unix.NFT_REJECT_TCP_RST},
	}})
	if err := c.Flush(); err != nil {
		return err
	}
	for _, state := range []string{"established", "close_wait"} {
		if err := writeFile("/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_"+state, strconv.Itoa(connTrackHold)); err != nil {
			return err
		}
	}
	// A closed connection's entry is kept 120 s (time_wait) or 10 s
	// (close), in a table the host shares (nf_conntrack_max, 262,144
	// here) and charged to no cgroup: churning short connections filled
	// it in 30 s, 126 MB of host kernel memory, and conntrack then dropped
	// every new SYN, unaudited (round 54). Such an entry bounds nothing
	// here (the socket is gone, or in TIME_WAIT, which the kernel bounds
	// with tcp_max_tw_buckets, set below).
	for _, state := range []string{"time_wait", "close"} {
		if err := writeFile("/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_"+state, "1"); err != nil {
			return err
		}
	}
	if err := writeFile("/proc/sys/net/ipv4/tcp_max_tw_buckets", strconv.Itoa(maxTimeWait)); err != nil {
		return err
	}
	// The kernel's TCP metrics cache is one hash for every namespace,
	// charged to no cgroup, whose full chains reuse their oldest entry
	// whoever owns it: 300,000 short connections to distinct 127.x
	// addresses held 98,304 entries (about 20 MB) and evicted all of the
	// host's (round 56). The sandbox saves none.
	if err := writeFile("/proc/sys/net/ipv4/tcp_no_metrics_save", "1"); err != nil {
		return err
	}
	// A fast-open client still caches the server's cookie there, one
	// entry per address (round 57: 150,000 connects evicted another
	// namespace's entries): no fast open in the sandbox.
	return writeFile("/proc/sys/net/ipv4/tcp_fastopen", "0")
}

// maxTimeWait bounds the sandbox's sockets in TIME_WAIT (60 s each, a few
// hundred bytes of unaccounted kernel memory): past it the kernel frees a
// closing socket at once instead.
const maxTimeWait = 4096

// connTrackHold, in seconds (20 days), is how long conntrack keeps an
// idle connection the program still holds; past it the connection leaves
// the count. The kernel takes at most INT_MAX jiffies (24.8 days at
// HZ=1000).
const connTrackHold = 20 * 24 * 3600

// nativeUint32 is v as the kernel's registers hold it.
func nativeUint32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }
