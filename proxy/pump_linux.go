package proxy

import (
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// pump copies src to dst with splice(2), through a pipe it borrows only
// while bytes are in it. Go's own splice (io.Copy between two TCPConns)
// holds a pipe pair for as long as the copy runs, idle or not: 10,000 idle
// tunnels would pin 40,000 pipe fds. pump hands its pipe back whenever src
// has nothing queued, so an idle tunnel holds its two sockets and nothing
// else.
//
// A wake-up costs what Go's splice costs: one splice that fills the pipe,
// one (or more, under back-pressure) that empties it into dst, and one
// that finds nothing before parking. Readiness is always judged by asking
// the socket, never by having been woken, so the edge-triggered netpoller
// cannot lose a FIN that arrived with the last bytes.
//
// Pipes are descriptors and pinned memory (two fds and up to 1 MiB each),
// and a tunnel whose peers do not read holds one per direction for as long
// as they do not: pipes open are bounded (pipeBudget), and a direction
// that finds the budget spent moves its burst through a user-space buffer
// instead (copyBurst), so a stuck tunnel costs its two sockets and at most
// two small buffers, whatever the number of tunnels.
//
// Both connections stay raw *net.TCPConn or *net.UnixConn; nothing wraps
// them, and the byte count is what splice (or the copy) moved.
func pump(dst, src net.Conn) (int64, error) {
	in, out := rawConn(src), rawConn(dst)
	if in == nil || out == nil {
		return io.Copy(dst, src)
	}
	var total int64
	for cold := true; ; cold = false {
		p, n, err := fill(in, cold)
		if err == errNoPipe {
			written, err := copyBurst(out, in)
			total += int64(written)
			if err != nil || written == 0 { // 0: src closed its side
				return total, err
			}
			continue
		}
		if err != nil || n == 0 { // n == 0: src closed its side
			return total, err
		}
		written, err := p.drain(out, n)
		total += int64(written)
		if err != nil {
			p.close() // it may still hold bytes
			return total, err
		}
		pipes.Put(p)
	}
}

func rawConn(c net.Conn) syscall.RawConn {
	var raw syscall.RawConn
	switch c := c.(type) {
	case *net.TCPConn:
		raw, _ = c.SyscallConn()
	case *net.UnixConn:
		raw, _ = c.SyscallConn()
	}
	return raw
}

// maxSplice is how much one splice moves at most: a full pipe.
const maxSplice = 1 << 20

// fill waits, in the runtime's poller, until src has bytes or has closed,
// and splices what is queued into a borrowed pipe. While it waits it holds
// no pipe. It returns the pipe and how many bytes it holds; 0 means src
// closed.
//
// A cold src (a tunnel that has not moved a byte yet) is asked whether
// anything is queued before a pipe is taken: thousands of tunnels opening
// at once would otherwise each take a pipe only to find nothing, faster
// than the collector closes the spares. After a wake-up, or after bytes
// moved, more bytes are likely and the splice itself is the question.
func fill(src syscall.RawConn, cold bool) (*pipe, int, error) {
	var p *pipe
	var n int
	var sysErr error
	err := src.Read(func(fd uintptr) bool {
		if cold {
			cold = false
			ready, err := queuedOrClosed(int(fd))
			if err != nil {
				sysErr = err // the socket's pending error, which the peek took
				return true
			}
			if !ready {
				parkingIdle()
				return false
			}
		}
		if p == nil {
			if p, sysErr = getPipe(); sysErr != nil {
				return true // errNoPipe: bytes are queued, the caller copies them
			}
		}
		for {
			n, sysErr = splice(int(fd), p.w, maxSplice)
			if sysErr != unix.EINTR {
				break
			}
		}
		if sysErr == unix.EAGAIN {
			pipes.Put(p) // idle: wait without a pipe
			p = nil
			return false
		}
		return true
	})
	if err == nil {
		err = sysErr
	}
	if (err != nil || n == 0) && p != nil {
		pipes.Put(p) // a failed or empty splice leaves the pipe empty
		p = nil
	}
	return p, n, err
}

// queuedOrClosed reports whether the socket has bytes queued or has
// closed: anything a splice would not answer with EAGAIN. One peek
// answers both; asking SIOCINQ first cost a second system call whenever
// nothing was queued, which for a fresh tunnel is the rule. A failed
// socket (a reset) is returned as the error: the peek takes the socket's
// pending error, so the splice after it would see only an end of file.
func queuedOrClosed(fd int) (bool, error) {
	var b [1]byte
	_, _, err := unix.Recvfrom(fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	switch err {
	case nil:
		return true, nil // a peeked byte, or the close (0)
	case unix.EAGAIN, unix.EINTR:
		return false, nil
	}
	return true, err
}

// drain splices the n bytes in p into dst, waiting in the poller while
// dst's send buffer is full.
func (p *pipe) drain(dst syscall.RawConn, n int) (int, error) {
	written := 0
	var sysErr error
	err := dst.Write(func(fd uintptr) bool {
		for written < n {
			m, err := splice(p.r, int(fd), n-written)
			switch {
			case m > 0:
				written += m
			case err == unix.EINTR:
			case err == unix.EAGAIN:
				waitingFor(int(fd))
				return false
			default:
				sysErr = err
				if err == nil { // cannot happen: the pipe holds n-written bytes
					sysErr = io.ErrUnexpectedEOF
				}
				return true
			}
		}
		return true
	})
	if err == nil {
		err = sysErr
	}
	return written, err
}

func splice(from, to, max int) (int, error) {
	n, err := unix.Splice(from, nil, to, nil, max, unix.SPLICE_F_NONBLOCK|unix.SPLICE_F_MOVE)
	return int(n), err
}

// copyBurst moves what src has queued to dst through a user-space buffer,
// waiting in the poller while dst is full. It returns 0 when src closed.
func copyBurst(dst, src syscall.RawConn) (int, error) {
	buf := copyBufs.Get().(*[copyBufSize]byte)
	defer copyBufs.Put(buf)
	n, err := rawRead(src, buf[:])
	if err != nil || n == 0 {
		return 0, err
	}
	written := 0
	var sysErr error
	err = dst.Write(func(fd uintptr) bool {
		for written < n {
			m, err := unix.Write(int(fd), buf[written:n])
			switch {
			case m > 0:
				written += m
			case err == unix.EINTR:
			case err == unix.EAGAIN:
				waitingFor(int(fd))
				return false
			default:
				sysErr = err
				return true
			}
		}
		return true
	})
	if err == nil {
		err = sysErr
	}
	return written, err
}

// rawRead reads what src has queued, waiting in the poller until it has
// some or has closed (0).
func rawRead(src syscall.RawConn, buf []byte) (int, error) {
	var n int
	var sysErr error
	err := src.Read(func(fd uintptr) bool {
		for {
			n, sysErr = unix.Read(int(fd), buf)
			if sysErr != unix.EINTR {
				break
			}
		}
		return sysErr != unix.EAGAIN
	})
	if err == nil {
		err = sysErr
	}
	return max(n, 0), err
}

// copyBufSize is copyBurst's buffer: what a stuck direction pins instead
// of a pipe.
const copyBufSize = 32 << 10

var copyBufs = sync.Pool{New: func() any { return new([copyBufSize]byte) }}

// waitingOn, if set, is told each time a direction waits for its
// destination (fd) to take bytes: back-pressure. Tests wait on it.
var waitingOn atomic.Pointer[func(fd int)]

func waitingFor(fd int) {
	if f := waitingOn.Load(); f != nil {
		(*f)(fd)
	}
}

// idleOn, if set, is told each time a fresh direction finds nothing queued
// and parks: a tunnel has reached splice and waits. Tests wait on it.
var idleOn atomic.Pointer[func()]

func parkingIdle() {
	if f := idleOn.Load(); f != nil {
		(*f)()
	}
}

// pipe is a pipe pair for splicing; pipes holds the empty ones.
type pipe struct {
	r, w    int
	cleanup runtime.Cleanup
}

var (
	pipes     sync.Pool
	pipesOpen atomic.Int64 // in use, pooled, or dropped by the pool and not yet collected
	// pipeBudget is how many pipes may be open at once, from RLIMIT_NOFILE
	// as DefaultMaxConnections counts it.
	pipeBudget = sync.OnceValue(func() int64 { return int64(pipesFor(NofileLimit())) })
	// pipeBudgetForTest, when set, replaces pipeBudget; atomic, because
	// pumps of earlier tests may still be asking.
	pipeBudgetForTest atomic.Pointer[int64]
)

// errNoPipe means every pipe of the budget is open.
var errNoPipe = errors.New("splice pipe budget spent")

func getPipe() (*pipe, error) {
	if p, ok := pipes.Get().(*pipe); ok {
		return p, nil
	}
	limit := pipeBudget()
	if b := pipeBudgetForTest.Load(); b != nil {
		limit = *b
	}
	if pipesOpen.Add(1) > limit {
		pipesOpen.Add(-1)
		return nil, errNoPipe
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		pipesOpen.Add(-1)
		return nil, err
	}
	// A 1 MiB pipe (the default pipe-max-size) moves a fast transfer in
	// few calls; the kernel may refuse it to an unprivileged user past
	// its pipe quota, and a smaller pipe still works.
	unix.FcntlInt(uintptr(fds[0]), unix.F_SETPIPE_SZ, maxSplice)
	p := &pipe{r: fds[0], w: fds[1]}
	// The pool drops idle pipes at garbage collection; close their fds then.
	p.cleanup = runtime.AddCleanup(p, closePipe, fds)
	return p, nil
}

func closePipe(fds [2]int) {
	unix.Close(fds[0])
	unix.Close(fds[1])
	pipesOpen.Add(-1)
}

// close discards a pipe that may hold bytes, instead of pooling it.
func (p *pipe) close() {
	p.cleanup.Stop()
	closePipe([2]int{p.r, p.w})
	p.r, p.w = -1, -1
}
