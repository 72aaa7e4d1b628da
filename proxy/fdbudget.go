package proxy

import (
	"syscall"

	"github.com/egressd/egressd/proxy/broker"
)

// How egressd spends RLIMIT_NOFILE: fdReserve descriptors for what is not
// a connection (listeners, the admin endpoint's 32, DNS queries' sockets
// beyond those counted below, the audit log, netlink), a bounded number of
// splice pipes (pipesFor, two descriptors each, shared by every tunnel),
// and fdsPerConn per connection under the Gate: the client's socket and,
// once dialled, the upstream one; a brokered connection (issue 15) may
// hold one more, since its requests reach the origin over up to two
// connections of its own. A connection resolves before it dials, and a
// brokered one redials the address it resolved, so a DNS socket and an
// upstream socket are never open together. Counting two for a brokered
// connection that opened eight upstream let 30 of them take egressd to
// its limit (nofile 256): every connection is counted at the most a
// connection can hold.
//
// A tunnel whose peers do not read holds its two sockets only: each
// direction waits with either one pipe of the budget or, once the budget
// is spent, a user-space buffer (copyBurst). Before the budget, such a
// tunnel held 6 descriptors against a cap that counted 2, and one
// integration within its own limits ran egressd out of descriptors.
const (
	fdsPerConn = broker.MaxDescriptors
	fdReserve  = 64
	maxPipes   = 128 // at most 128 MiB of pipe memory pinned by stuck tunnels
)

// pipesFor is the splice pipe budget for a descriptor limit: a sixteenth
// of what the reserve leaves, at most maxPipes.
func pipesFor(nofile uint64) int {
	if nofile <= fdReserve {
		return 0
	}
	return int(min((nofile-fdReserve)/16, maxPipes))
}

// DefaultMaxConnections derives the global cap from the descriptor limit:
// what is left after the reserve and the pipes, fdsPerConn per connection.
func DefaultMaxConnections(nofile uint64) int {
	const least = 16
	spare := int64(nofile) - fdReserve - 2*int64(pipesFor(nofile))
	return int(max(spare/fdsPerConn, least))
}

// NofileLimit is this process's RLIMIT_NOFILE (the Go runtime raises the
// soft limit to the hard one at start): what DefaultMaxConnections is given
// and what the pipe budget is taken from, so the two agree.
func NofileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	return rl.Cur
}
