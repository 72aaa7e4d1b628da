package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

// A peer that sends its last bytes and its FIN back to back wakes the
// edge-triggered poller once; the pump must still deliver every byte and
// then see the close.
func TestPumpDeliversTheLastBytesThatArriveWithTheFIN(t *testing.T) {
	pumpEverySizeWithItsFIN(t)
}

// pipeFDs counts this process's open pipes.
func pipeFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(target, "pipe:") {
			n++
		}
	}
	return n
}

// 10,000 idle tunnels must not pin 40,000 pipe fds: a pump waiting on an
// idle socket holds no pipe, and the pool's spare pipes are closed once the
// collector drops them.
func TestIdlePumpsHoldNoPipes(t *testing.T) {
	runtime.GC()
	runtime.GC()
	before := pipeFDs(t)
	const tunnels = 20
	for range tunnels {
		writer, src := tcpPair(t)
		dst, reader := tcpPair(t)
		go pump(dst, src)
		writer.Write(make([]byte, 256<<10))
		if _, err := io.ReadFull(reader, make([]byte, 256<<10)); err != nil {
			t.Fatal(err)
		}
	} // every pump is now parked on an idle socket
	waitFor(t, func() bool {
		runtime.GC() // the pool keeps spares across one collection
		return pipeFDs(t) <= before
	})
}

// refuseIoctlOnThisThread makes every ioctl(2) of the calling thread fail
// with EPERM (a seccomp filter, which binds this thread alone). The caller
// holds runtime.LockOSThread and never unlocks: the thread then exits with
// its goroutine, filter and all.
func refuseIoctlOnThisThread(t *testing.T) {
	t.Helper()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.SYS_IOCTL, Jt: 0, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		t.Fatalf("seccomp: %v", errno)
	}
	if _, err := unix.IoctlGetInt(0, unix.SIOCINQ); err != unix.EPERM {
		t.Fatalf("the filter does not hold: ioctl gave %v", err)
	}
}

// A cold tunnel (nothing moved yet) is asked once whether its socket has
// anything queued or has closed: a peek answers both, so no ioctl(2) is
// spent first, on both directions of every connection. The answer stays
// right in each of the three states.
func TestAColdSocketIsAskedOnceWithoutIoctl(t *testing.T) {
	idleFar, idle := tcpPair(t)
	queuedFar, queued := tcpPair(t)
	closedFar, closed := tcpPair(t)
	queuedFar.Write([]byte("x"))
	closedFar.Close()
	waitQueued(t, queued, 1)
	fd := func(c *net.TCPConn) int {
		raw, _ := c.SyscallConn()
		var n int
		raw.Control(func(f uintptr) { n = int(f) })
		return n
	}
	// The closed side's FIN has arrived when a peek says so.
	for buf := make([]byte, 1); ; runtime.Gosched() {
		if n, _, err := unix.Recvfrom(fd(closed), buf, unix.MSG_PEEK|unix.MSG_DONTWAIT); n == 0 && err == nil {
			break
		}
	}
	done := make(chan [3]bool)
	go func() {
		runtime.LockOSThread() // never unlocked: the filtered thread exits with this goroutine
		refuseIoctlOnThisThread(t)
		var got [3]bool
		for i, c := range []*net.TCPConn{idle, queued, closed} {
			ready, err := queuedOrClosed(fd(c))
			got[i] = ready && err == nil
		}
		done <- got
	}()
	got := <-done
	if got != [3]bool{false, true, true} {
		t.Fatalf("with ioctl refused: idle, queued, closed judged %v, want [false true true]", got)
	}
	_ = idleFar
}

// A reset that arrives while nothing is queued is the pending socket
// error, which the first call to look at the socket takes: a cold pump's
// peek must hand it on, or the splice after it finds a plain end of file
// and the tunnel is half-closed, as if the peer had finished, instead of
// torn down with the reset.
func TestAResetWithNothingQueuedEndsTheColdPumpWithTheReset(t *testing.T) {
	far, src := tcpPair(t)
	dst, _ := tcpPair(t)
	far.SetLinger(0)
	far.Close() // a reset
	raw, _ := src.SyscallConn()
	for { // until the reset has arrived: TCP_INFO reads the state without taking the error
		var state uint8
		raw.Control(func(fd uintptr) {
			if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
				state = info.State
			}
		})
		if state == unix.BPF_TCP_CLOSE {
			break
		}
		runtime.Gosched()
	}
	n, err := pump(dst, src)
	if n != 0 || !errors.Is(err, unix.ECONNRESET) {
		t.Fatalf("pump from a reset socket: %d bytes, %v; want 0 and the reset", n, err)

	}
}

// With every pipe of the budget open, a direction copies through a
// user-space buffer: every byte still arrives, and so does the FIN.
func TestPumpPastThePipeBudgetDeliversEveryByteAndTheFIN(t *testing.T) {
	none := int64(0)
	pipeBudgetForTest.Store(&none)
	t.Cleanup(func() { pipeBudgetForTest.Store(nil) })
	runtime.GC() // empty the pool: pooled pipes are spent budget too
	runtime.GC()
	opened := pipesOpen.Load()
	pumpEverySizeWithItsFIN(t)
	if now := pipesOpen.Load(); now > opened {
		t.Fatalf("%d pipes opened past a budget of 0", now-opened)
	}
}

// pumpEverySizeWithItsFIN pumps 1 B, 1 KiB and 3 MiB, each sent with its
// FIN right behind it, and fails unless every byte arrives, the pump
// counts them all, and the FIN is passed on.
func pumpEverySizeWithItsFIN(t *testing.T) {
	t.Helper()
	for _, size := range []int{1, 1 << 10, 3 << 20} {
		writer, src := tcpPair(t)
		dst, reader := tcpPair(t)
		payload := bytes.Repeat([]byte("egressd"), size/7+1)[:size]
		done := make(chan int64, 1)
		go func() {
			n, err := pump(dst, src)
			if err != nil {
				t.Errorf("pump: %v", err)
			}
			dst.CloseWrite()
			done <- n
		}()
		go func() { writer.Write(payload); writer.CloseWrite() }()
		got, err := io.ReadAll(reader)
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("size %d: got %d bytes (%v), want %d", size, len(got), err, size)
		}
		if n := <-done; n != int64(size) {
			t.Fatalf("size %d: pump counted %d", size, n)
		}
	}
}
