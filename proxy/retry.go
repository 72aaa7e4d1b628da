package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/policy"
)

// A TLS 1.3 server that wants another key share answers the first
// ClientHello with a HelloRetryRequest, and the client sends a second
// ClientHello, in clear, on the same connection (RFC 8446 §4.1.4). Only
// the first was checked: a client could name an allowed host first and
// another one second, and a shared front end that routes on the second
// hello would be domain fronting again. So before splicing, egressd reads
// the server's first record; if it is a HelloRetryRequest, it reads the
// client's next handshake message (after at most one middlebox
// compatibility ChangeCipherSpec) and holds it to the same checks as the
// first: a ClientHello with exactly one server_name, equal to the CONNECT
// host, and no ECH. After a ServerHello that is not a retry, everything
// the client sends is encrypted or cannot be a new hello the server would
// accept, and the tunnel is spliced.

// helloRetryRandom is the ServerHello.random that marks a HelloRetryRequest.
var helloRetryRandom = []byte{
	0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
	0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
}

const (
	recordTypeChangeCipherSpec = 20
	handshakeTypeServerHello   = 2
	maxRecordBytes             = 16<<10 + 256
)

// retryGuard runs the exchange above. It sends first (the checked
// ClientHello and what followed it) upstream, relays the server's first
// record to the client and, after a retry request, checks and relays the
// client's second hello. It returns the bytes relayed each way, and a
// reason when the tunnel must close.
func (t *tunnel) retryGuard(first []byte, br *bufio.Reader, wait time.Duration) (up, down int64, reason policy.Reason, msg string) {
	n, err := t.upstream.Write(first)
	up += int64(n)
	if err != nil {
		return up, down, policy.DialError, "origin went away before the ClientHello was sent"
	}
	t.upstream.SetReadDeadline(time.Now().Add(wait))
	held, flight, firstLen, err := readFirstFlight(t.upstream)
	if held != nil {
		defer putFlightBuffer(held)
	}
	t.upstream.SetReadDeadline(time.Time{})
	if len(flight) > 0 {
		n, werr := t.client.Write(flight)
		down += int64(n)
		if werr != nil {
			return up, down, policy.Timeout, "client went away during the TLS handshake"
		}
	}
	if err != nil || !isHelloRetry(flight[:firstLen]) {
		// Splice. An origin that has not answered within the ClientHello
		// timeout is spliced unchecked: the retry request is the server's
		// to send, and a front end answers a hello in one round trip.
		return up, down, "", ""
	}
	t.client.SetReadDeadline(time.Now().Add(wait))
	defer t.client.SetReadDeadline(time.Time{})
	var ccs []byte
	if b, err := br.Peek(1); err == nil && b[0] == recordTypeChangeCipherSpec {
		if ccs, err = readRecord(br); err != nil || len(ccs) != tlsRecordHeaderLen+1 {
			return up, down, policy.NotTLS, "malformed ChangeCipherSpec after a HelloRetryRequest"
		}
	}
	raw, sni, err := ReadClientHello(br)
	if reason := helloReason(err, sni, t.host); reason != "" {
		return up, down, reason, "second ClientHello, after a HelloRetryRequest: " + errString(err) + sniNote(sni, t.host)
	}
	n, err = t.upstream.Write(append(ccs, raw...))
	up += int64(n)
	if err != nil {
		return up, down, policy.DialError, "origin went away before the second ClientHello was sent"
	}
	return up, down, "", ""
}

func sniNote(sni, host allowlist.Name) string {
	if sni.String() != "" && sni != host {
		return "server_name " + sni.String() + " is not the CONNECT host " + host.String()
	}
	return ""
}

// flightBuffers hold the server's first flight while it is checked: one
// largest record and its header, borrowed only while bytes are in it.
// flightBuffersOut counts those lent, for the test that a silent origin
// holds none.
var (
	flightBuffers    = sync.Pool{New: func() any { b := make([]byte, tlsRecordHeaderLen+maxRecordBytes); return &b }}
	flightBuffersOut atomic.Int64
)

func getFlightBuffer() *[]byte {
	flightBuffersOut.Add(1)
	return flightBuffers.Get().(*[]byte)
}

func putFlightBuffer(b *[]byte) {
	flightBuffersOut.Add(-1)
	flightBuffers.Put(b)
}

// readFirstFlight reads c until it holds the server's first TLS record
// whole, usually in one read that may also take what followed the record
// in the same segments. It returns every byte read, all of it to relay,
// in a pooled buffer the caller puts back (nil when nothing was read),
// and the first record's length. The buffer is taken only once bytes are
// there: while the origin is silent egressd waits in the poller holding
// nothing, as it does for an idle tunnel. A header announcing a record
// larger than TLS allows ends the read with an error; c's read deadline
// holds.
func readFirstFlight(c *net.TCPConn) (held *[]byte, flight []byte, first int, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, nil, 0, err
	}
	n := 0
	var sysErr error
	err = raw.Read(func(fd uintptr) bool {
		if held == nil {
			held = getFlightBuffer()
		}
		buf := *held
		for {
			m, e := syscall.Read(int(fd), buf[n:])
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
				if n == 0 { // nothing yet: wait holding nothing
					putFlightBuffer(held)
					held = nil
				}
				return false
			case e != nil:
				sysErr = e
				return true
			case m == 0:
				sysErr = io.EOF
				return true
			}
			n += m
			if n >= tlsRecordHeaderLen {
				first = tlsRecordHeaderLen + (int(buf[3])<<8 | int(buf[4]))
				if first > len(buf) {
					sysErr = io.ErrUnexpectedEOF
					return true
				}
				if n >= first {
					return true
				}
			}
		}
	})
	if err == nil {
		err = sysErr
	}
	if held == nil {
		return nil, nil, 0, err
	}
	return held, (*held)[:n], min(first, n), err
}

// readRecord reads one TLS record, header included.
func readRecord(r io.Reader) ([]byte, error) {
	hdr := make([]byte, tlsRecordHeaderLen)
	if got, err := io.ReadFull(r, hdr); err != nil {
		return hdr[:got], err
	}
	n := int(hdr[3])<<8 | int(hdr[4])
	if n > maxRecordBytes {
		return hdr, io.ErrUnexpectedEOF
	}
	rec := make([]byte, tlsRecordHeaderLen+n)
	copy(rec, hdr)
	got, err := io.ReadFull(r, rec[tlsRecordHeaderLen:])
	return rec[:tlsRecordHeaderLen+got], err // every byte consumed, to relay
}

// isHelloRetry reports whether record carries a HelloRetryRequest: a
// handshake record whose first message is a ServerHello with the retry
// random.
func isHelloRetry(record []byte) bool {
	body := record[min(len(record), tlsRecordHeaderLen):]
	const randomAt = handshakeHeaderLen + 2 // type, length, legacy_version
	if len(record) < tlsRecordHeaderLen || record[0] != recordTypeHandshake || len(body) < randomAt+32 || body[0] != handshakeTypeServerHello {
		return false
	}
	return bytes.Equal(body[randomAt:randomAt+32], helloRetryRandom)
}
