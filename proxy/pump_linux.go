package proxy

import (
	"io"
	"net"
	"runtime"
	"sync"
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
// Both connections stay raw *net.TCPConn or *net.UnixConn; nothing wraps
// them, and the byte count is what splice moved.
func pump(dst, src net.Conn) (int64, error) {
	in, out := rawConn(src), rawConn(dst)
	if in == nil || out == nil {
		return io.Copy(dst, src)
	}
	var total int64
	for cold := true; ; cold = false {
		p, n, err := fill(in, cold)
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
				return false
			}
		}
		if p == nil {
			if p, sysErr = getPipe(); sysErr != nil {
				return true
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

// pipe is a pipe pair for splicing; pipes holds the empty ones.
type pipe struct {
	r, w    int
	cleanup runtime.Cleanup
}

var pipes sync.Pool

func getPipe() (*pipe, error) {
	if p, ok := pipes.Get().(*pipe); ok {
		return p, nil
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, err
	}
	// A 1 MiB pipe (the default pipe-max-size) moves a fast transfer in
	// few calls; the kernel may refuse it to an unprivileged user past
	// its pipe quota, and a smaller pipe still works.
	unix.FcntlInt(uintptr(fds[0]), unix.F_SETPIPE_SZ, maxSplice)
	p := &pipe{r: fds[0], w: fds[1]}
	// The pool drops idle pipes at garbage collection; close their fds then.
	p.cleanup = runtime.AddCleanup(p, func(fds [2]int) { unix.Close(fds[0]); unix.Close(fds[1]) }, fds)
	return p, nil
}

// close discards a pipe that may hold bytes, instead of pooling it.
func (p *pipe) close() {
	p.cleanup.Stop()
	unix.Close(p.r)
	unix.Close(p.w)
	p.r, p.w = -1, -1
}
