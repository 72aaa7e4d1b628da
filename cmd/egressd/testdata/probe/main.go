// Command probe attacks the sandbox from inside, for the egressd run
// tests. Each mode prints what it reached; the tests judge the lines.
package main

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe walk FILE SOCKET | highbits | int80 | x32")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "pipesz":
		pipeSizes()
	case "optmem":
		socks, _ := strconv.Atoi(os.Args[2])
		optMem(socks)
	case "mptcp":
		mptcp()
	case "tcpqueue":
		conns, _ := strconv.Atoi(os.Args[2])
		size, _ := strconv.Atoi(os.Args[3])
		family := "4"
		if len(os.Args) > 5 {
			family = os.Args[5]
		}
		tcpQueue(conns, size, os.Args[4], family)
	case "walk":
		walk(os.Args[2], os.Args[3])
	case "highbits":
		highBits()
	case "int80":
		if !canInt80 {
			fmt.Println("int80 unsupported")
			return
		}
		// i386 socket(AF_VSOCK, SOCK_STREAM, 0) is call 359.
		r := int80(359, unix.AF_VSOCK, unix.SOCK_STREAM, 0)
		fmt.Println("int80 socket returned", r)
	case "dial":
		dial(os.Args[2:])
	case "abstract":
		c, err := net.Dial("unix", "@"+os.Args[2])
		if err == nil {
			c.Close()
		}
		fmt.Println("abstract:", err)
	case "caps":
		data, _ := os.ReadFile("/proc/self/status")
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "Cap") || strings.HasPrefix(l, "Uid") {
				fmt.Println(strings.Join(strings.Fields(l), " "))
			}
		}
	case "ifbind":
		ifBind()
	case "lobypass":
		loBypass(os.Args[2], os.Args[3])
	case "lobound-tcp":
		n, _ := strconv.Atoi(os.Args[2])
		loBoundTCP(n)
	case "fullthendial":
		fullThenDial(os.Args[2])
	case "igmpjoin":
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		if err == nil {
			err = unix.SetsockoptIPMreq(fd, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, &unix.IPMreq{Multiaddr: [4]byte{239, 9, 9, 9}})
		}
		fmt.Println("igmp join:", err)
		time.Sleep(200 * time.Millisecond) // the report leaves at once; the exit must not outrun its read
		unix.Close(fd)
	case "udplite":
		// UDP-Lite: UDP's header under its own protocol number, 136.
		ap := netip.MustParseAddrPort(os.Args[2])
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 136)
		if err == nil {
			err = unix.Sendto(fd, []byte("probe"), 0, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()})
			unix.Close(fd)
		}
		fmt.Println("udplite:", err)
	case "srh":
		// A TCP connect and a UDP datagram to TARGET with an IPv6 segment
		// routing header (type 4, no privilege needed) whose first segment
		// is DECOY: the packet leaves addressed to DECOY and names TARGET
		// only inside the header.
		target, decoy := netip.MustParseAddr(os.Args[2]), netip.MustParseAddr(os.Args[3])
		srh := []byte{0, 4, 4, 1, 1, 0, 0, 0} // next, length 4 (2 segments), type 4, segments left 1, last entry 1
		t16, d16 := target.As16(), decoy.As16()
		srh = append(append(srh, t16[:]...), d16[:]...)
		for _, typ := range []int{unix.SOCK_STREAM, unix.SOCK_DGRAM} {
			fd, err := unix.Socket(unix.AF_INET6, typ, 0)
			if err == nil {
				err = unix.SetsockoptString(fd, unix.IPPROTO_IPV6, unix.IPV6_RTHDR, string(srh))
				// A connect nobody refuses would wait minutes; 20 s says so.
				unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &unix.Timeval{Sec: 20})
				if err == nil {
					to := &unix.SockaddrInet6{Port: 443, Addr: t16}
					if typ == unix.SOCK_STREAM {
						err = unix.Connect(fd, to)
					} else {
						err = unix.Sendto(fd, []byte("probe"), 0, to)
					}
				}
				unix.Close(fd)
			}
			fmt.Printf("srh %d: %v\n", typ, err)
		}
	case "udpburst":
		// Datagrams to ports 20000.. of one address, then exit at once.
		n, _ := strconv.Atoi(os.Args[3])
		for i := 0; i < n; i++ {
			if c, err := net.Dial("udp", net.JoinHostPort(os.Args[2], strconv.Itoa(20000+i))); err == nil {
				c.Write([]byte("probe"))
				c.Close()
			}
		}
		fmt.Println("sent", n)
	case "udpflood":
		// Datagrams to ports 20000.. of one address from 8 sockets at once,
		// as fast as the kernel takes them; prints how many it took.
		n, _ := strconv.Atoi(os.Args[3])
		dst := net.ParseIP(os.Args[2])
		var sent atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.ListenUDP("udp", nil)
				if err != nil {
					return
				}
				defer c.Close()
				for i := g; i < n; i += 8 {
					if _, err := c.WriteToUDP([]byte("probe"), &net.UDPAddr{IP: dst, Port: 20000 + i%40000}); err == nil {
						sent.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		fmt.Println("sent", sent.Load())
	case "stdio":
		stdio(os.Args[2])
	case "ioctls":
		ioctls()
	case "tiocsig":
		// A pty master as stdin: signal the foreground job of its slave.
		_, _, e := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSIG, uintptr(unix.SIGINT))
		fmt.Println("TIOCSIG SIGINT:", errnoOrOK(e)) // the kernel sends only SIGINT, SIGQUIT or SIGTSTP
	case "mapfiles":
		mapFiles(os.Args[2], os.Args[3])
	case "x32":
		r, _, errno := unix.RawSyscall(0x40000000|unix.SYS_GETPID, 0, 0, 0)
		fmt.Println("x32 getpid returned", int(r), int(errno))
	case "aio":
		legacyAIO()
	case "growsdown":
		mb, _ := strconv.Atoi(os.Args[2])
		growsDown(mb)
	case "shmlock":
		shmLock()
	case "hugetlb":
		hugeTLB()
	case "pagecache":
		pageCache(os.Args[2])
	case "socketpair":
		socketPair()
	case "schedule":
		schedule()
	default:
		os.Exit(2)
	}
}

// dial makes each attempt, "tcp:ADDR:PORT" or "udp:ADDR:PORT", in order,
// and prints how each ended. A datagram is written and not waited for.
func dial(targets []string) {
	for _, t := range targets {
		proto, addr, _ := strings.Cut(t, ":")
		c, err := net.DialTimeout(proto, addr, 10*time.Second)
		if err == nil && proto == "udp" {
			_, err = c.Write([]byte("probe"))
		}
		if c != nil {
			c.Close()
		}
		fmt.Printf("%s: %v\n", t, err)
	}
}

// walk follows every fd, cwd and root link of every process and thread it
// can see, climbs ".." from each, and reports any way to the host's file
// or socket.
func walk(file, sock string) {
	var links []string
	// Listed processes and threads, and any pid or tid that answers by
	// number though it is not listed.
	var dirs []string
	for _, pattern := range []string{"/proc/[0-9]*", "/proc/[0-9]*/task/[0-9]*"} {
		found, _ := filepath.Glob(pattern)
		dirs = append(dirs, found...)
	}
	for n := 1; n <= 4096; n++ {
		dirs = append(dirs, "/proc/"+strconv.Itoa(n), "/proc/1/task/"+strconv.Itoa(n))
	}
	{
		procs := dirs
		for _, p := range procs {
			links = append(links, p+"/cwd", p+"/root")
			fds, _ := filepath.Glob(p + "/fd/*")
			links = append(links, fds...)
		}
	}
	tried := 0
	for _, l := range links {
		if _, err := os.Stat(l); err != nil {
			continue // unreadable: that is the point
		}
		tried++
		for up := 0; up <= 24; up++ {
			base := l + strings.Repeat("/..", up)
			if _, err := os.Stat(base + file); err == nil {
				fmt.Println("REACHED file", base+file)
				break
			}
			if reachSocket(base + sock) {
				fmt.Println("REACHED socket", base+sock)
				break
			}
		}
	}
	fmt.Println("links", len(links), "followed", tried)
}

// reachSocket connects through an O_PATH descriptor, so the path's length
// is no limit.
func reachSocket(path string) bool {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	c, err := net.Dial("unix", "/proc/self/fd/"+strconv.Itoa(fd))
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// highBits makes the calls the filter names with bits above 32 set in int
// arguments, which the kernel ignores.
func highBits() {
	const hi = 1 << 32
	try := func(name string, trap, a1, a2, a3 uintptr) {
		r, _, errno := unix.RawSyscall(trap, a1, a2, a3)
		if errno == 0 {
			fmt.Printf("%s: allowed (%d)\n", name, int(r))
			if trap == unix.SYS_SOCKET {
				unix.Close(int(r))
			}
			return
		}
		fmt.Printf("%s: %s\n", name, errnoName(errno))
	}
	var c byte = 'x'
	try("socket(AF_VSOCK|1<<32)", unix.SYS_SOCKET, unix.AF_VSOCK|hi, unix.SOCK_STREAM, 0)
	try("socket(AF_NETLINK|1<<32, NETLINK_KOBJECT_UEVENT)", unix.SYS_SOCKET, unix.AF_NETLINK|hi, unix.SOCK_RAW, unix.NETLINK_KOBJECT_UEVENT)
	try("socket(AF_NETLINK, NETLINK_KOBJECT_UEVENT|1<<32)", unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_KOBJECT_UEVENT|hi)
	try("socket(AF_PACKET|1<<32)", unix.SYS_SOCKET, unix.AF_PACKET|hi, unix.SOCK_RAW, 0)
	try("socket(AF_INET, SOCK_RAW, ICMP)", unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	try("socket(AF_INET6, SOCK_RAW, TCP)", unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_TCP)
	try("socket(AF_PACKET)", unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW, 0)
	try("ioctl(TIOCSTI|1<<32)", unix.SYS_IOCTL, 0, unix.TIOCSTI|hi, uintptr(unsafePointer(&c)))
	try("ioctl(TIOCSTI)", unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafePointer(&c)))
}

func errnoName(e syscall.Errno) string {
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return strconv.Itoa(int(e))
}

// stdio reads a line from stdin, then tries what a program handed a host
// socket as fd 0 could do with it: ask its network namespace for the
// interfaces (SIOCGIFCONF), disconnect it (connect AF_UNSPEC) and connect
// it to TO, a host service. It reports on stdout, and on stderr.
func stdio(to string) {
	var line [64]byte
	n, err := unix.Read(0, line[:])
	report := fmt.Sprintf("read %q %v\n", line[:max(n, 0)], err)
	for fd := 0; fd <= 2; fd++ {
		var st unix.Stat_t
		kind := "closed"
		if unix.Fstat(fd, &st) == nil {
			kind = map[uint32]string{unix.S_IFIFO: "pipe", unix.S_IFSOCK: "socket", unix.S_IFREG: "file", unix.S_IFCHR: "chardev"}[st.Mode&unix.S_IFMT]
		}
		report += fmt.Sprintf("fd%d: %s\n", fd, kind)
	}
	var ifs [40 * 16]byte
	conf := struct {
		len int32
		_   int32
		buf uintptr
	}{len: int32(len(ifs)), buf: uintptr(unsafePointer(&ifs[0]))}
	_, _, e := unix.Syscall(unix.SYS_IOCTL, 0, unix.SIOCGIFCONF, uintptr(unsafe.Pointer(&conf)))
	report += fmt.Sprintf("SIOCGIFCONF fd0: %s\n", errnoOrOK(e))
	var unspec [16]byte // a sockaddr whose family is AF_UNSPEC: disconnect
	_, _, e = unix.Syscall(unix.SYS_CONNECT, 0, uintptr(unsafe.Pointer(&unspec[0])), uintptr(len(unspec)))
	report += fmt.Sprintf("connect fd0 AF_UNSPEC: %s\n", errnoOrOK(e))
	ap := netip.MustParseAddrPort(to)
	err = unix.Connect(0, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()})
	report += fmt.Sprintf("connect fd0 %s: %v\n", to, err)
	os.Stderr.WriteString(report)
	os.Stdout.WriteString(report)
}

func errnoOrOK(e syscall.Errno) string {
	if e == 0 {
		return "ok"
	}
	return errnoName(e)
}

// ioctls sends each serial line setter to a pipe of its own, a zeroed
// argument each: the kernel answers ENOTTY (and Landlock's device ioctl
// rule does not apply to a pipe), so EPERM can only be the filter's.
func ioctls() {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		fmt.Println("pipe:", err)
		return
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	null := p[0]
	for _, c := range []struct {
		name string
		req  uintptr
	}{
		{"TIOCSSERIAL", unix.TIOCSSERIAL}, {"TIOCSRS485", unix.TIOCSRS485}, {"TIOCSISO7816", unix.TIOCSISO7816},
		{"TIOCSLCKTRMIOS", unix.TIOCSLCKTRMIOS}, {"TIOCSERCONFIG", unix.TIOCSERCONFIG}, {"TIOCSERSETMULTI", unix.TIOCSERSETMULTI},
		{"TCSETX", unix.TCSETX}, {"TCSETXF", unix.TCSETXF}, {"TCSETXW", unix.TCSETXW},
		{"TIOCMSET", unix.TIOCMSET}, {"TIOCMBIS", unix.TIOCMBIS}, {"TIOCMBIC", unix.TIOCMBIC},
		{"TIOCSSERIAL|1<<32", unix.TIOCSSERIAL | 1<<32},
		{"TIOCSIG", unix.TIOCSIG}, {"TIOCPKT", unix.TIOCPKT},
	} {
		var arg [256]byte
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(null), c.req, uintptr(unsafe.Pointer(&arg[0])))
		fmt.Printf("ioctl(%s): %s\n", c.name, errnoOrOK(e))
	}
}

// ifBind tries every socket option that sends a socket's packets out of a
// named interface, lo, past the default route through egress0: each
// prints its errno (round 52: packets to any address went out lo,
// unaudited).
func ifBind() {
	errName := func(err error) string {
		if err == nil {
			return "ok"
		}
		return unix.ErrnoName(err.(unix.Errno))
	}
	var out []string
	for _, o := range []struct {
		name          string
		family, level int
		opt           int
		set           func(fd, level, opt int) error
	}{
		{"SO_BINDTODEVICE", unix.AF_INET, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, func(fd, l, o int) error { return unix.SetsockoptString(fd, l, o, "lo") }},
		{"SO_BINDTOIFINDEX", unix.AF_INET, unix.SOL_SOCKET, unix.SO_BINDTOIFINDEX, func(fd, l, o int) error { return unix.SetsockoptInt(fd, l, o, 1) }},
		{"IP_UNICAST_IF", unix.AF_INET, unix.IPPROTO_IP, unix.IP_UNICAST_IF, func(fd, l, o int) error { return unix.SetsockoptInt(fd, l, o, 1<<24) }},
		{"IP_MULTICAST_IF", unix.AF_INET, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, func(fd, l, o int) error { return unix.SetsockoptInet4Addr(fd, l, o, [4]byte{127, 0, 0, 1}) }},
		{"IPV6_UNICAST_IF", unix.AF_INET6, unix.IPPROTO_IPV6, unix.IPV6_UNICAST_IF, func(fd, l, o int) error { return unix.SetsockoptInt(fd, l, o, 1) }},
		{"IPV6_MULTICAST_IF", unix.AF_INET6, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_IF, func(fd, l, o int) error { return unix.SetsockoptInt(fd, l, o, 1) }},
	} {
		fd, err := unix.Socket(o.family, unix.SOCK_DGRAM, 0)
		if err == nil {
			err = o.set(fd, o.level, o.opt)
			unix.Close(fd)
		}
		out = append(out, o.name+": "+errName(err))
	}
	fmt.Println(strings.Join(out, ", "))
}

// loBypass sends a datagram out of lo past the routing table two ways no
// socket option names (round 53): an AF_INET6 socket whose connect to
// fe80::1%lo failed, which the kernel leaves bound to lo, to the
// v4-mapped form of unicast; and a socket bound to 127.0.0.1, to the
// multicast address, which takes its source address's device.
func loBypass(unicast, multicast string) {
	u := netip.MustParseAddrPort(unicast)
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM, 0)
	if err == nil {
		err = unix.Connect(fd, &unix.SockaddrInet6{Port: 53, Addr: netip.MustParseAddr("fe80::1").As16(), ZoneId: 1})
		fmt.Println("link-local connect:", err)
		err = unix.Sendto(fd, []byte("probe"), 0, &unix.SockaddrInet6{Port: int(u.Port()), Addr: netip.AddrFrom16(u.Addr().As16()).As16()})
		unix.Close(fd)
	}
	fmt.Println("bound to lo by a failed connect:", err)
	m := netip.MustParseAddrPort(multicast)
	fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err == nil {
		if err = unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err == nil {
			err = unix.Sendto(fd, []byte("probe"), 0, &unix.SockaddrInet4{Port: int(m.Port()), Addr: m.Addr().As4()})
		}
		unix.Close(fd)
	}
	fmt.Println("multicast from 127.0.0.1:", err)
}

// fullThenDial holds connections to its own listener until the sandbox's
// connection bound refuses one, then connects to target (round 54: past
// the bound, the sandbox's nftables refused every SYN, to any address,
// before egress0 could audit it).
func fullThenDial(target string) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		fmt.Println("listen:", err)
		return
	}
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	var mine []net.Conn
	for range 100000 {
		c, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			fmt.Println("bound reached after", len(mine), "connections:", err)
			break
		}
		mine = append(mine, c)
	}
	_, err = net.DialTimeout("tcp", target, 5*time.Second)
	fmt.Println("direct:", err)
}

// loBoundTCP starts n TCP connects, each from a socket a failed connect to
// fe80::1%lo left bound to lo, to a v4-mapped address, and closes each at
// once (round 56: such SYNs leave by lo and reach egress0 only through
// lo's tc hook; conntrack tracked them and the connection bound counted
// them, until every later direct connect was refused unaudited).
func loBoundTCP(n int) {
	sent := 0
	for i := range n {
		fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
		if err != nil {
			fmt.Println("socket:", err)
			break
		}
		unix.Connect(fd, &unix.SockaddrInet6{Port: 9, Addr: netip.MustParseAddr("fe80::1").As16(), ZoneId: 1})
		to := netip.AddrFrom4([4]byte{203, 0, 113, byte(1 + i%250)})
		if err := unix.Connect(fd, &unix.SockaddrInet6{Port: 443, Addr: netip.AddrFrom16(to.As16()).As16()}); err == unix.EINPROGRESS {
			sent++
		}
		unix.Close(fd)
	}
	fmt.Println("lo-bound connects started:", sent)
}
