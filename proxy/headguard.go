package proxy

import (
	"bytes"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
	"golang.org/x/net/http/httpguts"
)

// headGuard is an accepted connection until its request head is handed to
// egressd's handler. net/http answers a head its parser refuses (a request
// line like CONNECT ok%2eapi.example:443 or a lowercase method, a folded
// or colonless header line, a duplicate Host, an unknown version or
// transfer coding, a head over the size limit) with a bare "400 Bad
// Request" (or 431, 501, 505) before any handler runs, and has no hook there; headGuard replaces that
// answer, the one thing net/http writes on the connection before the
// handler, with egressd's refusal: X-Egress-Reason: bad_request and a
// sentence. The refusal is audited before its answer is written, as every
// refusal is, so a client that has read the answer finds its record in the
// log, and the record names the target the client asked for: headGuard
// keeps the request line the client sent (firstLine) until the handler
// takes the connection.
//
// The handler unwraps it on hijack (see unguard), so a tunnel runs on the
// raw connection and still splices.
type headGuard struct {
	net.Conn
	s        *Server
	handed   atomic.Bool // the handler has the connection: reads and writes pass through
	answered atomic.Bool // egressd wrote its own refusal in net/http's place
	line     firstLine
}

// netHTTPAnswer begins every answer net/http writes itself, before a
// handler runs: 400 (and its variants with a reason after the status
// text), 431, 501 for an unknown transfer coding, 505.
var netHTTPAnswer = []byte("HTTP/1.1 ")

func (g *headGuard) Read(b []byte) (int, error) {
	n, err := g.Conn.Read(b)
	if n > 0 && !g.handed.Load() {
		g.line.keep(b[:n])
	}
	return n, err
}

func (g *headGuard) Write(b []byte) (int, error) {
	if g.handed.Load() || !bytes.HasPrefix(b, netHTTPAnswer) {
		return g.Conn.Write(b)
	}
	g.answered.Store(true)
	code, msg, sentence := http.StatusBadRequest, "request egressd cannot parse (request line or headers)",
		"egressd: the request could not be parsed (its request line or a header line is malformed); send CONNECT host:443 HTTP/1.1 with well-formed headers"
	if bytes.HasPrefix(b, []byte("HTTP/1.1 431")) {
		code, msg = http.StatusRequestHeaderFieldsTooLarge, "request headers over egressd's limit"
		sentence = "egressd: the request's head is over egressd's limit of about " + strconv.Itoa((maxHeaderBytes+netHTTPSlack)>>10) + " KiB; a CONNECT needs no header but Host"
	}
	g.s.requestArrived(g) // audited here, not again when net/http closes it
	g.s.preHandlerRejected(msg, g.line.target())
	if _, err := g.Conn.Write(answer(code, policy.BadRequest, sentence)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// hand marks the connection as the handler's: nothing more is kept.
func (g *headGuard) hand() {
	g.handed.Store(true)
	g.line.drop()
}

// unguard is c without its headGuard, once the handler has it.
func unguard(c net.Conn) net.Conn {
	if g, ok := c.(*headGuard); ok {
		g.hand()
		return g.Conn
	}
	return c
}

// netHTTPSlack is what net/http adds to MaxHeaderBytes before it refuses.
const netHTTPSlack = 4 << 10

// maxFirstLine bounds the request line a headGuard keeps.
const maxFirstLine = 1 << 10

// firstLine is the first line a client sent that is not blank, up to
// maxFirstLine bytes, kept as it arrives. net/http reads on its own
// goroutines, so it is locked.
type firstLine struct {
	mu   sync.Mutex
	b    []byte
	done bool // the line ended, or reached the bound
}

func (l *firstLine) keep(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	if len(l.b) == 0 {
		b = bytes.TrimLeft(b, "\r\n") // net/http refuses leading blank lines; the target is on the next
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b, l.done = b[:i], true
	}
	if room := maxFirstLine - len(l.b); len(b) >= room {
		b, l.done = b[:room], true
	}
	l.b = append(l.b, b...)
}

// complete reports whether a whole request line was kept.
func (l *firstLine) complete() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done && len(l.b) > 0
}

func (l *firstLine) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b, l.done = nil, true
}

// requestTarget is what a request line asked for, as sent.
type requestTarget struct {
	method string // "" unless a token
	raw    string // the request target, or the whole line when it has no space
}

// target reads the kept line for what it asked for: the method and the
// token after it, across any run of ASCII whitespace (leading whitespace
// skipped), so "CONNECT  host:443" or a tab after the method still names
// its host. A line with no clean method and target is the raw target
// whole, escaped by the writer, so nothing the client sent is hidden.
func (l *firstLine) target() requestTarget {
	l.mu.Lock()
	line := strings.TrimSuffix(string(l.b), "\r")
	l.mu.Unlock()
	fields := strings.FieldsFunc(line, isASCIISpace)
	if len(fields) < 2 || len(fields[0]) > 16 || strings.IndexFunc(fields[0], func(r rune) bool { return !httpguts.IsTokenRune(r) }) >= 0 {
		return requestTarget{raw: line}
	}
	return requestTarget{method: fields[0], raw: fields[1]}
}

// isASCIISpace reports whether r is ASCII whitespace: space, tab, line
// feed, vertical tab, form feed or carriage return.
func isASCIISpace(r rune) bool { return r == ' ' || (r >= '\t' && r <= '\r') }

// name puts t on ev: the canonical host and port when the target parses,
// and the raw target, escaped and capped by the writer, as every CONNECT
// event carries it.
func (t requestTarget) name(ev *audit.Event) {
	ev.Method, ev.HostRaw = t.method, t.raw
	if host, port, ok := policy.ParseTarget(t.raw); ok {
		ev.Host, ev.Port = host.String(), port
	}
}
