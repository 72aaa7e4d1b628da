package proxy

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/egressd/egressd/policy"
)

// statusFor maps a reason code to the HTTP status of the refusal.
func statusFor(r policy.Reason) int {
	switch r {
	case policy.BadRequest:
		return http.StatusBadRequest
	case policy.MethodNotAllowed:
		return http.StatusMethodNotAllowed
	case policy.LimitExceeded, policy.AuditUnavailable:
		return http.StatusServiceUnavailable
	case policy.DNSError, policy.DialError:
		return http.StatusBadGateway
	case policy.Timeout:
		return http.StatusGatewayTimeout
	}
	return http.StatusForbidden
}

// ReasonHeader carries the reason code on every refusal.
const ReasonHeader = "X-Egress-Reason"

// refusal renders the response for a refused CONNECT: the status, the reason
// header and one sentence for the author. It never contains the raw target.
func refusal(reason policy.Reason, sentence string) []byte {
	return answer(statusFor(reason), reason, sentence)
}

// answer renders a refusal with an explicit status.
func answer(code int, reason policy.Reason, sentence string) []byte {
	body := sentence + "\n"
	return []byte("HTTP/1.1 " + strconv.Itoa(code) + " " + http.StatusText(code) + "\r\n" +
		ReasonHeader + ": " + string(reason) + "\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n" +
		"Connection: close\r\n\r\n" + body)
}

// lingerLimit bounds how long and how much a refused client is read after
// its answer, so the answer is not lost to a reset.
const (
	lingerTime  = 500 * time.Millisecond
	lingerBytes = 64 << 10
)

// writeAndClose sends resp, half-closes, and discards what the client still
// sends for a moment before closing. Closing a socket with unread data makes
// Linux send a reset, which can destroy the answer before the client reads
// it; a pipelining client would then never see why it was refused.
//
// The lingering happens on its own goroutine, after the refusal is counted
// done: a client that never closes must not hold a handshake slot.
func writeAndClose(c net.Conn, resp []byte) {
	c.SetWriteDeadline(time.Now().Add(lingerTime))
	c.Write(resp)
	hc, ok := c.(halfCloser)
	if !ok {
		c.Close()
		return
	}
	hc.CloseWrite()
	c.SetReadDeadline(time.Now().Add(lingerTime))
	go func() {
		io.Copy(io.Discard, io.LimitReader(c, lingerBytes))
		c.Close()
	}()
}
