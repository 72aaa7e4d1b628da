package sandbox

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Attempt is one direct connection the sandboxed program tried: a TCP
// connect or a UDP datagram to an address, around the proxy.
type Attempt struct {
	Proto string // "tcp", "udp", "udplite", "igmp", "mld", or "ipN" for IP protocol N
	Dst   netip.AddrPort
}

// ServeEgress reads what the sandbox routes to egress0 until f is closed,
// or until a read deadline is set: then it reads what is still queued
// (the last packets of a program that has exited) and returns. Nothing
// read is ever sent anywhere. Each TCP SYN and each UDP datagram is
// reported; a SYN is answered with a reset.
func ServeEgress(f *os.File, report func(Attempt)) error {
	buf := make([]byte, 1<<16)
	handle := func(p []byte) {
		a, reset, ok := parsePacket(p)
		if !ok {
			return // IPv6 housekeeping, a stray segment, anything else
		}
		report(a)
		if reset != nil {
			f.Write(reset)
		}
	}
	for {
		n, err := f.Read(buf)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return drain(f, buf, handle)
		case errors.Is(err, os.ErrClosed):
			return nil
		case err != nil:
			return err
		}
		handle(buf[:n])
	}
}

// drain handles every packet still queued, without waiting for more. A
// read with a past deadline fails before it reads, so the deadline is
// cleared and the queue read through the raw descriptor until EAGAIN.
func drain(f *os.File, buf []byte, handle func([]byte)) error {
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		return err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Read(func(fd uintptr) bool {
		for {
			n, err := syscall.Read(int(fd), buf)
			if err != nil || n <= 0 {
				return true // EAGAIN: empty; never wait
			}
			handle(buf[:n])
		}
	})
}

// The few bytes of IP, TCP and UDP that ServeEgress needs: who a packet
// was for, and the reset that refuses a TCP connect. Nothing in the
// standard library or golang.org/x/net builds a TCP segment.

const (
	protoTCP      = 6
	protoUDP      = 17
	protoUDPLite  = 136 // UDP's header, its own protocol number
	protoHopByHop = 0   // IPv6 extension headers the kernel lets a program add
	protoRouting  = 43  // (IPV6_HOPOPTS, IPV6_RTHDR, IPV6_DSTOPTS, fragmentation)
	protoFragment = 44
	protoAuth     = 51
	protoDstOpts  = 60
	protoIGMP     = 2
	protoICMPv6   = 58

	mldReport, mldv2Report = 131, 143 // ICMPv6 types of a multicast listener report

	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

// parsePacket reads one IP packet from the program. It returns the attempt
// for a TCP SYN or a UDP datagram, and for a SYN the reset to write back.
func parsePacket(p []byte) (Attempt, []byte, bool) {
	if len(p) < 1 {
		return Attempt{}, nil, false
	}
	var src, dst netip.Addr
	var proto byte
	var payload []byte
	switch p[0] >> 4 {
	case 4:
		ihl := int(p[0]&0x0f) * 4
		if len(p) < 20 || ihl < 20 || len(p) < ihl {
			return Attempt{}, nil, false
		}
		if binary.BigEndian.Uint16(p[6:8])&0x1fff != 0 {
			return Attempt{}, nil, false // a later fragment: its first one was seen
		}
		total := int(binary.BigEndian.Uint16(p[2:4]))
		if total < ihl || total > len(p) {
			return Attempt{}, nil, false
		}
		proto, src, dst = p[9], netip.AddrFrom4([4]byte(p[12:16])), netip.AddrFrom4([4]byte(p[16:20]))
		payload = p[ihl:total]
	case 6:
		if len(p) < 40 {
			return Attempt{}, nil, false
		}
		proto, src, dst = p[6], netip.AddrFrom16([16]byte(p[8:24])), netip.AddrFrom16([16]byte(p[24:40]))
		n := int(binary.BigEndian.Uint16(p[4:6]))
		if 40+n > len(p) {
			return Attempt{}, nil, false
		}
		var ok bool
		if proto, dst, payload, ok = walkIPv6Extensions(proto, dst, p[40:40+n]); !ok {
			return Attempt{}, nil, false
		}
	default:
		return Attempt{}, nil, false
	}
	switch proto {
	case protoUDP, protoUDPLite:
		if len(payload) < 8 {
			return Attempt{}, nil, false
		}
		name := "udp"
		if proto == protoUDPLite {
			name = "udplite"
		}
		return Attempt{Proto: name, Dst: netip.AddrPortFrom(dst, binary.BigEndian.Uint16(payload[2:4]))}, nil, true
	case protoTCP:
		if len(payload) < 20 {
			return Attempt{}, nil, false
		}
		flags := payload[13]
		if flags&(tcpSYN|tcpACK|tcpRST) != tcpSYN {
			return Attempt{}, nil, false // only a connect's first segment counts
		}
		sport, dport := binary.BigEndian.Uint16(payload[0:2]), binary.BigEndian.Uint16(payload[2:4])
		seq := binary.BigEndian.Uint32(payload[4:8])
		dataLen := len(payload) - int(payload[12]>>4)*4
		if dataLen < 0 {
			return Attempt{}, nil, false
		}
		ack := seq + 1 + uint32(dataLen) // the SYN, and any fast-open data
		if flags&tcpFIN != 0 {
			ack++
		}
		a := Attempt{Proto: "tcp", Dst: netip.AddrPortFrom(dst, dport)}
		return a, tcpReset(netip.AddrPortFrom(dst, dport), netip.AddrPortFrom(src, sport), ack), true
	}
	// A multicast membership report carries the groups (and sources) a
	// program joined, chosen by it: 28 bytes of its own in one report
	// (round 54). The kernel sends them, but each is the program's doing.
	if proto == protoIGMP {
		return Attempt{Proto: "igmp", Dst: netip.AddrPortFrom(dst, 0)}, nil, true
	}
	if proto == protoICMPv6 && len(payload) > 0 && (payload[0] == mldReport || payload[0] == mldv2Report) {
		return Attempt{Proto: "mld", Dst: netip.AddrPortFrom(dst, 0)}, nil, true
	}
	// Any other protocol the kernel lets the program speak (SCTP, DCCP
	// where loaded) is an attempt too, portless here, whatever the
	// address: link-local 169.254.169.254 included (round 57). Only
	// ICMPv6 to a multicast or link-local address is the kernel's own
	// housekeeping (neighbour discovery).
	if proto == protoICMPv6 && (dst.IsMulticast() || dst.IsLinkLocalUnicast()) {
		return Attempt{}, nil, false
	}
	return Attempt{Proto: "ip" + strconv.Itoa(int(proto)), Dst: netip.AddrPortFrom(dst, 0)}, nil, true
}

// walkIPv6Extensions skips the extension headers in front of an IPv6
// packet's transport header. A routing header names the packet's real
// destination: the kernel sends a socket's packets to the header's next
// segment and carries the socket's own peer as the final one (segment 0
// of a type 4 segment routing header, the last address of types 0 and 2).
// Without this a program setting IPV6_RTHDR was audited as protocol 43 to
// a decoy first hop, and its connect got no reset. It reports false for a
// packet to ignore: truncated, or a later fragment (its first was seen).
func walkIPv6Extensions(proto byte, dst netip.Addr, b []byte) (byte, netip.Addr, []byte, bool) {
	for range 8 { // more headers than any legitimate packet carries is not an attempt
		switch proto {
		case protoHopByHop, protoDstOpts, protoRouting:
			if len(b) < 8 || len(b) < 8+int(b[1])*8 {
				return 0, dst, nil, false
			}
			n := 8 + int(b[1])*8
			if proto == protoRouting && n >= 8+16 {
				switch b[2] {
				case 4: // segment routing: segment 0 is the final one, TLVs may follow the list
					dst = netip.AddrFrom16([16]byte(b[8:24]))
				case 0, 2: // addresses only: the last one is the final one
					last := 8 + (n-8)/16*16 - 16
					dst = netip.AddrFrom16([16]byte(b[last : last+16]))
				}
			}
			proto, b = b[0], b[n:]
		case protoFragment:
			if len(b) < 8 || binary.BigEndian.Uint16(b[2:4])>>3 != 0 {
				return 0, dst, nil, false
			}
			proto, b = b[0], b[8:]
		case protoAuth:
			if len(b) < 8 || len(b) < (int(b[1])+2)*4 {
				return 0, dst, nil, false
			}
			proto, b = b[0], b[(int(b[1])+2)*4:]
		default:
			return proto, dst, b, true
		}
	}
	return 0, dst, nil, false
}

// tcpReset builds the RST|ACK from "from" to "to" that refuses a SYN.
func tcpReset(from, to netip.AddrPort, ack uint32) []byte {
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp[0:], from.Port())
	binary.BigEndian.PutUint16(tcp[2:], to.Port())
	binary.BigEndian.PutUint32(tcp[8:], ack)
	tcp[12] = 5 << 4
	tcp[13] = tcpRST | tcpACK
	var pseudo []byte
	var ip []byte
	if from.Addr().Is4() {
		ip = make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], 40)
		binary.BigEndian.PutUint16(ip[6:], 0x4000) // don't fragment
		ip[8], ip[9] = 64, protoTCP
		f, t := from.Addr().As4(), to.Addr().As4()
		copy(ip[12:], f[:])
		copy(ip[16:], t[:])
		binary.BigEndian.PutUint16(ip[10:], checksum(ip))
		pseudo = append(append(append([]byte{}, f[:]...), t[:]...), 0, protoTCP, 0, 20)
	} else {
		ip = make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], 20)
		ip[6], ip[7] = protoTCP, 64
		f, t := from.Addr().As16(), to.Addr().As16()
		copy(ip[8:], f[:])
		copy(ip[24:], t[:])
		pseudo = append(append(append([]byte{}, f[:]...), t[:]...), 0, 0, 0, 20, 0, 0, 0, protoTCP)
	}
	binary.BigEndian.PutUint16(tcp[16:], checksum(append(pseudo, tcp...)))
	return append(ip, tcp...)
}

// checksum is the Internet checksum (RFC 1071) of b.
func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
