package proxy

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/policy"
)

// Only the first ClientHello was checked, and everything the client had
// sent behind it went upstream with it. But a client may send more before
// the origin answers: a 0-RTT client's ChangeCipherSpec and early data, and,
// after a TLS 1.3 HelloRetryRequest (RFC 8446 §4.1.4), a second
// ClientHello. A second hello naming another host, pipelined or sent after
// the retry request, reaches a front end that may route on it: domain
// fronting again. So until the origin has answered with something other
// than a retry request, egressd forwards the client's records one at a
// time, each checked (clientRecords): a handshake record must start a
// ClientHello held to the first one's checks (exactly one server_name,
// equal to the CONNECT host, no ECH); a ChangeCipherSpec must be the one
// byte 0x01; application_data and alerts pass as they are; any other record
// closes the tunnel. Once the origin answers otherwise (a ServerHello that
// is not a retry, an alert, anything), it has committed to the handshake
// and reads no ClientHello any more: egressd stops reading the client
// (finishing and checking a record already begun), relays the answer, and
// splices. The origin never receives an unchecked byte before that answer.

// helloRetryRandom is the ServerHello.random that marks a HelloRetryRequest.
var helloRetryRandom = []byte{
	0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
	0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
}

const (
	recordTypeChangeCipherSpec = 20
	recordTypeAlert            = 21
	recordTypeApplicationData  = 23
	handshakeTypeServerHello   = 2
	maxRecordBytes             = 16<<10 + 256
)

// aLongTimeAgo is a deadline that has passed: setting it wakes a blocked read.
var aLongTimeAgo = time.Unix(1, 0)

// handshakeRefusal is why the handshake guard closed a tunnel, with the
// server_name of a refused hello.
type handshakeRefusal struct {
	reason policy.Reason
	msg    string
	sni    allowlist.Name
	sniRaw string // the server_name as sent, when it is no host name
}

// sendHello sends first (the checked ClientHello) upstream. The handler
// calls it on the goroutine that read and recorded the hello, so the hello
// leaves without waiting for another goroutine to be scheduled.
func (t *tunnel) sendHello(first []byte) (up int64, no handshakeRefusal) {
	if f := helloSending.Load(); f != nil {
		(*f)()
	}
	n, err := t.upstream.Write(first)
	if err != nil {
		return int64(n), handshakeRefusal{reason: policy.DialError, msg: "origin went away before the ClientHello was sent"}
	}
	return int64(n), handshakeRefusal{}
}

// helloSending, if set, is told on the goroutine about to send a tunnel's
// first ClientHello upstream. Tests look at that goroutine's stack.
var helloSending atomic.Pointer[func()]

// guardHandshake runs the exchange above, once the first ClientHello was
// sent (sendHello), until the origin has answered. It returns the bytes
// relayed each way past that hello, and a refusal when the tunnel must
// close. The caller splices what is left.
func (t *tunnel) guardHandshake(br *bufio.Reader, wait time.Duration) (up, down int64, no handshakeRefusal) {
	g := &clientRecords{t: t, br: br, wait: wait}
	done := make(chan handshakeRefusal, 1)
	go func() { done <- g.forward() }()
	join := func() handshakeRefusal {
		g.stop()
		no := <-done
		up += g.up
		t.client.SetReadDeadline(time.Time{})
		return no
	}
	origin := newServerRecords(t.upstream)
	defer origin.release()
	for {
		record, err := origin.next()
		answered := err != nil || !(isHelloRetry(record) || isChangeCipherSpec(record))
		if answered {
			// Stop checking before the client can see the answer, so what
			// it sends in reply (a TLS 1.2 ClientKeyExchange) is not judged
			// as a hello.
			if no := join(); no.reason != "" {
				return up, down, no
			}
		} else if isHelloRetry(record) {
			g.retried.Store(true)
		}
		if answered {
			// What the origin sent behind its answer would be spliced
			// unchecked next: it goes with the answer, in one write. It
			// lies right behind the record in the buffer.
			record = record[:len(record)+len(origin.rest())]
		}
		if len(record) > 0 {
			if f := answerRelaying.Load(); f != nil && answered {
				(*f)()
			}
			n, werr := t.client.Write(record)
			down += int64(n)
			if werr != nil {
				t.abort()
				if !answered {
					// The checker may have closed the tunnel under this
					// write: its refusal is the reason, not the write's.
					if no := join(); no.reason != "" {
						return up, down, no
					}
				}
				return up, down, handshakeRefusal{reason: policy.Timeout, msg: "client went away during the TLS handshake"}
			}
		}
		if answered {
			return up, down, handshakeRefusal{}
		}
	}
}

// answerRelaying, if set, is told on the goroutine about to relay the
// origin's answer to the client. Tests look at that goroutine's stack.
var answerRelaying atomic.Pointer[func()]

// clientRecords forwards the client's records upstream, checked, until
// stopped. It owns reading the client and writing upstream until forward
// returns.
type clientRecords struct {
	t       *tunnel
	br      *bufio.Reader
	wait    time.Duration // to finish a record once begun
	retried atomic.Bool   // the origin asked for a retry
	up      int64         // bytes written upstream; read after forward returns

	mu      sync.Mutex
	stopped bool
	busy    bool // a record has begun: stop lets it finish
}

// stop asks forward to return at the next record boundary, waking it if it
// is waiting for the client.
func (g *clientRecords) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	if !g.busy {
		g.t.client.SetReadDeadline(aLongTimeAgo)
	}
}

// forward checks and forwards records until stopped, or until the client
// is done. A refusal has closed the tunnel already, so that the reader of
// the origin's side wakes too.
func (g *clientRecords) forward() handshakeRefusal {
	for hellos := 1; ; {
		begun, err := g.next()
		if err == io.EOF {
			g.t.upstream.CloseWrite() // the client is done sending; pass it on
			return handshakeRefusal{}
		}
		if err != nil {
			g.t.abort()
			return handshakeRefusal{}
		}
		if !begun {
			return handshakeRefusal{}
		}
		record, no := g.checkedRecord(&hellos)
		if no.reason != "" {
			g.t.closeWith(no.reason)
			return no
		}
		n, err := g.t.upstream.Write(record)
		g.up += int64(n)
		if err != nil {
			g.t.abort()
			return handshakeRefusal{reason: policy.DialError, msg: "origin went away during the TLS handshake"}
		}
	}
}

// next waits for the first byte of the client's next record. It reports
// false when stopped before one began; once one has begun, it is finished
// and checked whatever happens, within the wait.
func (g *clientRecords) next() (begun bool, err error) {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return false, nil
	}
	g.busy = false
	g.t.client.SetReadDeadline(time.Time{})
	g.mu.Unlock()

	_, err = g.br.Peek(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		if g.stopped {
			return false, nil
		}
		return false, err
	}
	g.busy = true
	g.t.client.SetReadDeadline(time.Now().Add(g.wait))
	return true, nil
}

// checkedRecord reads the client's next record, or the records of its next
// ClientHello, and checks them.
func (g *clientRecords) checkedRecord(hellos *int) ([]byte, handshakeRefusal) {
	hdr, err := g.br.Peek(tlsRecordHeaderLen)
	if err != nil {
		return nil, recordRefusal(err, hdr)
	}
	switch {
	case hdr[0] == recordTypeHandshake:
		*hellos++
		raw, sni, err := ReadClientHello(g.br)
		if reason := helloReason(err, sni, g.t.host); reason != "" {
			no := handshakeRefusal{reason: reason, msg: g.helloName(*hellos) + ": " + errString(err) + sniNote(sni, g.t.host)}
			if reason == policy.SNIMismatch {
				no.sni, no.sniRaw = sni, rawServerName(err)
			}
			return nil, no
		}
		return raw, handshakeRefusal{}
	case hdr[1] != 3:
		return nil, handshakeRefusal{reason: policy.NotTLS, msg: "a record that is not TLS after the ClientHello"}
	case hdr[0] == recordTypeChangeCipherSpec, hdr[0] == recordTypeAlert, hdr[0] == recordTypeApplicationData:
		record, err := readRecord(g.br)
		if err != nil {
			return nil, recordRefusal(err, record)
		}
		if hdr[0] == recordTypeChangeCipherSpec && !isChangeCipherSpec(record) {
			return nil, handshakeRefusal{reason: policy.NotTLS, msg: "malformed ChangeCipherSpec before the origin answered"}
		}
		return record, handshakeRefusal{}
	default:
		return nil, handshakeRefusal{reason: policy.NotTLS, msg: "a TLS record of type " + strconv.Itoa(int(hdr[0])) + " before the origin answered"}
	}
}

// helloName names the n-th ClientHello for the audit line.
func (g *clientRecords) helloName(n int) string {
	name := "ClientHello " + strconv.Itoa(n)
	if n == 2 {
		name = "second ClientHello"
	}
	if g.retried.Load() {
		return name + ", after a HelloRetryRequest"
	}
	return name + ", before the origin answered"
}

// recordRefusal turns a failed read of a record begun into a refusal:
// timeout when the wait ran out, not_tls otherwise.
func recordRefusal(err error, raw []byte) handshakeRefusal {
	if he, ok := readErr(err, raw).(*HelloError); ok && he.Reason == policy.Timeout {
		return handshakeRefusal{reason: policy.Timeout, msg: "a TLS record begun and not finished in time"}
	}
	return handshakeRefusal{reason: policy.NotTLS, msg: "incomplete or oversized TLS record after the ClientHello"}
}

func sniNote(sni, host allowlist.Name) string {
	if sni.String() != "" && sni != host {
		return "server_name " + sni.String() + " is not the CONNECT host " + host.String()
	}
	return ""
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

// isChangeCipherSpec reports whether record is the one-byte
// ChangeCipherSpec either side may send in clear (RFC 8446 §5).
func isChangeCipherSpec(record []byte) bool {
	return len(record) == tlsRecordHeaderLen+1 && record[0] == recordTypeChangeCipherSpec && record[1] == 3 && record[5] == 1
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
