package proxy

import (
	"io"
	"net"
	"net/http"
	"time"
)

// hasBody reports a request that declares a body. Nothing egressd answers
// outside a CONNECT reads one.
func hasBody(r *http.Request) bool { return r.ContentLength != 0 || len(r.TransferEncoding) > 0 }

// answerAndClose writes resp on w's connection and closes it without
// waiting for the request's body. After a handler returns, net/http reads
// up to 256 KiB of a body the handler left unread, so a client that
// declares a body and never sends it held the connection (and its slot,
// or an admin slot nothing may evict) until a read deadline, or for ever
// where there is none. What the client did send is read for at most
// lingerFor, so the answer is not lost to a reset. It reports false, with
// nothing written, when the connection cannot be taken over.
func answerAndClose(w http.ResponseWriter, resp *http.Response) (net.Conn, bool) {
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, false
	}
	c.SetDeadline(time.Now().Add(lingerFor))
	resp.Write(c)
	if cw, ok := unguard(c).(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		io.CopyN(io.Discard, c, 64<<10)
	}
	c.Close()
	return c, true
}

// lingerFor bounds how long a refused connection's answer may take to
// write and its unread bytes to drain.
const lingerFor = 500 * time.Millisecond
