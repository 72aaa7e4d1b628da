package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// socketWatch is the init's second line behind boundConnections. The
// connection count is conntrack's, and conntrack's TCP state can leave the
// socket's: a FIN retransmitted into a full receive queue takes the entry
// to TIME_WAIT, connlimit stops counting it, and the socket, unaccepted and
// charged to no cgroup, keeps its queue (4,000 attempts of 64 KiB under a
// bound of 124 left up to 602 alive). The kernel's own count of the
// namespace's TCP sockets in use (sockstat's "inuse", per namespace) cannot
// drift so; the init reads it each socketWatchPeriod and, past the bound,
// kills every process of the sandbox: what was queued is freed with them.
//
// A connection its client resets while it waits in the accept queue of the
// program's own listener leaves both counts (conntrack's entry closes, the
// kernel unhashes the child) but stays in the queue with its data until
// accepted: 6,000 held 397 MB under a bound of 248. So the watch also sums
// the accept queues of the namespace's listeners (queueLimit).
type socketWatch struct {
	limit      int                    // sockets in use
	queueLimit int                    // connections waiting in accept queues
	breach     atomic.Pointer[string] // why the sandbox was killed, once it was
}

// socketWatchPeriod is how often the init counts. Between two counts a
// program can open sockets at loopback speed, but only conntrack's
// desynchronised ones pass the connection bound, a few hundred a second.
const socketWatchPeriod = 100 * time.Millisecond

func openSocketWatch(connections int) (*socketWatch, error) {
	// Limits.TCPSockets and Limits.TCPQueued.
	w := &socketWatch{limit: socketLimit(connections), queueLimit: connections + socketSlack}
	if _, err := w.inUse(); err != nil {
		return nil, err
	}
	if _, err := w.queued(); err != nil {
		return nil, err
	}
	return w, nil
}

// inUse is the namespace's TCP sockets in use, IPv4 and IPv6: listening,
// connected, queued on a listener or orphaned, not TIME_WAIT. The kernel
// counts each protocol apart, AF_INET6 sockets (v4-mapped ones to
// ::ffff:127.0.0.1 included) in sockstat6's TCP6 line; counting only
// sockstat let a program queue 12,660 sockets over AF_INET6 past a bound of
// 2,048. The files are opened for each count, not held: the init keeps no
// descriptor the sandbox's programs could aim at
// (TestRunInitHoldsNoHostDescriptor).
func (w *socketWatch) inUse() (int, error) {
	v4, err := sockstatInUse("/proc/self/net/sockstat", "TCP: inuse ")
	if err != nil {
		return 0, err
	}
	v6, err := sockstatInUse("/proc/self/net/sockstat6", "TCP6: inuse ")
	if errors.Is(err, fs.ErrNotExist) {
		return v4, nil // a kernel without IPv6 makes no AF_INET6 socket
	}
	if err != nil {
		return 0, err
	}
	return v4 + v6, nil
}

// sockstatInUse reads the count after prefix in the sockstat file path.
func sockstatInUse(path, prefix string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1024)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return 0, err
	}
	for _, line := range strings.Split(string(buf[:n]), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			count, _, _ := strings.Cut(rest, " ")
			return strconv.Atoi(count)
		}
	}
	return 0, fmt.Errorf("no %q line in %s: %q", prefix, path, buf[:n])
}

// queued is how many connections the namespace's listeners hold in their
// accept queues, IPv4 and IPv6. For a LISTEN row of /proc/net/tcp the
// rx_queue column is the accept queue's length (sk_ack_backlog), reset
// children included. The kernel lists every listener before any other
// socket, so the read stops at the first row that is not one: its cost is
// bounded by the listeners, which the socket count bounds (a listener is
// a socket in use); more than that many is a breach of its own.
func (w *socketWatch) queued() (int, error) {
	sum := 0
	for _, path := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		n, err := acceptQueues(path, w.limit)
		if errors.Is(err, fs.ErrNotExist) && path != "/proc/self/net/tcp" {
			continue // a kernel without IPv6
		}
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// tcpListen is a LISTEN row's st column in /proc/net/tcp.
const tcpListen = "0A"

// acceptQueues sums the rx_queue column of the LISTEN rows at the head of
// the /proc/net/tcp table path, reading no more than maxListeners of them.
func acceptQueues(path string, maxListeners int) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	rows := bufio.NewScanner(f)
	rows.Scan() // the header
	sum, listeners := 0, 0
	for rows.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue ...
		fields := strings.Fields(rows.Text())
		if len(fields) < 5 {
			return 0, fmt.Errorf("%s: a row of %d fields", path, len(fields))
		}
		if fields[3] != tcpListen {
			return sum, nil
		}
		if listeners++; listeners > maxListeners {
			return 0, fmt.Errorf("%s: more than %d listeners", path, maxListeners)
		}
		_, rx, _ := strings.Cut(fields[4], ":")
		n, err := strconv.ParseUint(rx, 16, 32)
		if err != nil {
			return 0, fmt.Errorf("%s: rx_queue %q: %v", path, rx, err)
		}
		sum += int(n)
	}
	return sum, rows.Err()
}

// run counts until the sandbox holds more than the bound, or the count
// cannot be read (nothing fails open); then it records why and kills every
// process but the init, whose reaper returns the target's status.
func (w *socketWatch) run() {
	t := time.NewTicker(socketWatchPeriod)
	defer t.Stop()
	for range t.C {
		why := w.check()
		if why == "" {
			continue
		}
		w.breach.Store(&why)
		unix.Kill(-1, unix.SIGKILL)
		return
	}
}

// check counts once and says why the sandbox must be killed, or "".
func (w *socketWatch) check() string {
	n, err := w.inUse()
	if err != nil {
		return "the sandbox's TCP sockets could not be counted (" + err.Error() + "): the sandbox was killed"
	}
	if n > w.limit {
		return fmt.Sprintf("%d TCP sockets in the sandbox, past its bound of %d: the sandbox was killed", n, w.limit)
	}
	q, err := w.queued()
	if err != nil {
		return "the sandbox's accept queues could not be counted (" + err.Error() + "): the sandbox was killed"
	}
	if q > w.queueLimit {
		return fmt.Sprintf("%d connections queued on the sandbox's listeners, past its bound of %d: the sandbox was killed", q, w.queueLimit)
	}
	return ""
}

// reason is why run killed the sandbox, or "".
func (w *socketWatch) reason() string {
	if p := w.breach.Load(); p != nil {
		return *p
	}
	return ""
}
