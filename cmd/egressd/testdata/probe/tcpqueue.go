package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tcpQueue attacks the host's TCP memory from a listener in the sandbox:
// it makes conns connections to its own listener, writes size bytes on
// each and closes the client end, so no descriptor stays open; with accept
// "1" it accepts each one and never reads it. It reports how many
// connections the kernel let in, how many were refused, and what the
// namespace's sockets on that port hold (its /proc/net/tcp).
//
// With accept "2" it is no attack but a busy program: each connection is
// accepted, read and closed at both ends, and none must be refused.
//
// With accept "r" no connection is accepted and each client is closed
// with a reset (SO_LINGER 0): the queued child leaves conntrack's count
// and sockstat's, but stays in the accept queue with its data. With "0"
// and "r" a new listener is opened each somaxconn connections, so none
// drops a SYN. The report's "backlog" is what the namespace's listeners
// hold queued.
//
// With family "6" the listener is an AF_INET6 socket on [::] (dual stack),
// so the connections queued on it are AF_INET6 sockets, which the kernel
// counts apart from AF_INET ones (sockstat6), although the client dials
// 127.0.0.1.
func tcpQueue(conns, size int, accept, family string) {
	network, addr := "tcp4", "127.0.0.1:0"
	if family == "6" {
		network, addr = "tcp", "[::]:0"
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		fmt.Println("listen:", err)
		return
	}
	port := ln.Addr().(*net.TCPAddr).Port
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	data := make([]byte, size)
	var kept []net.Conn // the accepted ends, held unread
	made, refused := 0, 0
	perListener := somaxconn()
	ports := []int{port}
	for i := range conns {
		if (accept == "r" || accept == "0") && i > 0 && i%perListener == 0 {
			more, err := net.Listen(network, addr)
			if err != nil {
				fmt.Println("listen:", err)
				break
			}
			defer more.Close()
			ports = append(ports, more.Addr().(*net.TCPAddr).Port)
			target = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[len(ports)-1]))
		}
		c, err := net.Dial("tcp4", target)
		if errors.Is(err, syscall.ECONNREFUSED) {
			refused++
			continue
		} else if err != nil {
			fmt.Println("dial:", err)
			break
		}
		made++
		c.Write(data) // queued before any accept: the kernel charges it at accept, past any limit
		if accept == "r" {
			c.(*net.TCPConn).SetLinger(0)
		} else if accept != "0" {
			a, err := ln.Accept()
			if err != nil {
				fmt.Println("accept:", err)
				break
			}
			if accept == "2" {
				io.ReadFull(a, data)
				a.Close()
			} else {
				kept = append(kept, a)
			}
		}
		c.Close()
	}
	held, bytes := queuedOn(ports)
	fmt.Printf("made %d refused %d held %d queued %d accepted %d backlog %d\n", made, refused, held, bytes, len(kept), backlog())
	if d, err := time.ParseDuration(os.Getenv("PROBE_HOLD")); err == nil {
		time.Sleep(d)
	}
	ln.Close() // not before: a listener's close resets what it holds
}

// afterHeader is where the first line of a /proc/net table after its header
// starts.
func afterHeader(table []byte) int {
	if i := strings.IndexByte(string(table), '\n'); i >= 0 {
		return i + 1
	}
	return len(table)
}

// queuedOn counts the namespace's sockets on the local ports that are not
// listeners, and the bytes in their receive queues.
func queuedOn(ports []int) (held, bytes int) {
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		fmt.Println("/proc/net/tcp:", err)
		return -1, -1
	}
	if v6, err := os.ReadFile("/proc/net/tcp6"); err == nil {
		data = append(data, v6[afterHeader(v6):]...) // its header line dropped
	}
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 5 || f[3] == "0A" { // 0A: LISTEN
			continue
		}
		_, local, _ := strings.Cut(f[1], ":")
		if p, _ := strconv.ParseInt(local, 16, 32); !slices.Contains(ports, int(p)) {
			continue
		}
		_, rx, _ := strings.Cut(f[4], ":")
		n, _ := strconv.ParseInt(rx, 16, 64)
		held, bytes = held+1, bytes+int(n)
	}
	return held, bytes
}

// somaxconn is the namespace's net.core.somaxconn, the backlog Go's
// listeners ask for.
func somaxconn() int {
	b, _ := os.ReadFile("/proc/sys/net/core/somaxconn")
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 1 {
		return 128
	}
	return n
}

// backlog is how many connections the namespace's listeners hold in their
// accept queues: a LISTEN row's rx_queue column.
func backlog() int {
	sum := 0
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, _ := os.ReadFile(table)
		for _, line := range strings.Split(string(data), "\n")[1:] {
			if f := strings.Fields(line); len(f) >= 5 && f[3] == "0A" {
				_, rx, _ := strings.Cut(f[4], ":")
				n, _ := strconv.ParseInt(rx, 16, 64)
				sum += int(n)
			}
		}
	}
	return sum
}

// mptcp asks for MPTCP sockets directly, IPv4 and IPv6, and through Go's
// listener, which tries MPTCP first and must fall back to TCP.
func mptcp() {
	for _, family := range []int{unix.AF_INET, unix.AF_INET6} {
		fd, err := unix.Socket(family, unix.SOCK_STREAM, unix.IPPROTO_MPTCP)
		if err == nil {
			unix.Close(fd)
		}
		fmt.Printf("socket(%d, MPTCP): %v\n", family, errName(err))
	}
	var lc net.ListenConfig
	lc.SetMultipathTCP(true)
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		fmt.Println("listen:", err)
		return
	}
	defer ln.Close()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		fmt.Println("dial:", err)
		return
	}
	defer c.Close()
	a, err := ln.Accept()
	if err != nil {
		fmt.Println("accept:", err)
		return
	}
	defer a.Close()
	multipath, _ := a.(*net.TCPConn).MultipathTCP()
	fmt.Println("Go listener with MPTCP asked: works, multipath", multipath)
}

// errName is the errno's name, or "ok".
func errName(err error) string {
	if err == nil {
		return "ok"
	}
	if e, ok := err.(unix.Errno); ok {
		return unix.ErrnoName(e)
	}
	return err.Error()
}

// pipeSizes asks F_SETPIPE_SZ for sizes around the default (64 KiB), and
// for 1 MiB with bit 32 set, which the kernel drops.
func pipeSizes() {
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		fmt.Println("pipe:", err)
		return
	}
	for _, size := range []uint64{4096, 65536, 65537, 1 << 20, 1<<32 | 1<<20} {
		_, _, e := unix.Syscall(unix.SYS_FCNTL, uintptr(p[1]), unix.F_SETPIPE_SZ, uintptr(size))
		got, _ := unix.FcntlInt(uintptr(p[1]), unix.F_GETPIPE_SZ, 0)
		var err error
		if e != 0 {
			err = e
		}
		fmt.Printf("F_SETPIPE_SZ %#x: %s, size %d\n", size, errName(err), got)
	}
}
