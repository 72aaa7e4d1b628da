package proxy

import (
	"bytes"
	"net"
	"sync/atomic"

	"github.com/egressd/egressd/policy"
)

// headGuard is an accepted connection until its request head is handed to
// egressd's handler. net/http answers a request line its parser refuses
// (CONNECT ok%2eapi.example:443, a port of +443, a tab before the version,
// a lowercase method) with a bare "400 Bad Request" before any handler
// runs, and has no hook there; headGuard replaces that answer, the one
// thing net/http writes on the connection before the handler, with
// egressd's refusal: X-Egress-Reason: bad_request and a sentence. The
// refusal is audited before its answer is written, as every refusal is, so
// a client that has read the 400 finds its record in the log.
//
// The handler unwraps it on hijack (see unguard), so a tunnel runs on the
// raw connection and still splices.
type headGuard struct {
	net.Conn
	s      *Server
	handed atomic.Bool // the handler has the connection: writes pass through
}

// netHTTPBadRequest begins net/http's answer to a request it cannot parse.
var netHTTPBadRequest = []byte("HTTP/1.1 400 Bad Request")

func (g *headGuard) Write(b []byte) (int, error) {
	if g.handed.Load() || !bytes.HasPrefix(b, netHTTPBadRequest) {
		return g.Conn.Write(b)
	}
	g.s.requestArrived(g) // audited here, not again when net/http closes it
	g.s.preHandlerRejected("request line egressd cannot parse")
	p := g.s.opts.Registry.Policy(g.s.opts.Key)
	if _, err := g.Conn.Write(refusal(policy.BadRequest, policy.Sentence(policy.Decision{Reason: policy.BadRequest}, p))); err != nil {
		return 0, err
	}
	return len(b), nil
}

// unguard is c without its headGuard, once the handler has it.
func unguard(c net.Conn) net.Conn {
	if g, ok := c.(*headGuard); ok {
		g.handed.Store(true)
		return g.Conn
	}
	return c
}
