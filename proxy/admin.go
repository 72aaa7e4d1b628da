package proxy

import (
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AdminHandler serves /healthz (the process answers), /readyz (every
// listener up, every policy loaded, the audit log writable) and /metrics,
// on its own mux. It serves no pprof and nothing that reveals key material.
func AdminHandler(ready func() (bool, string), reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ok, why := ready()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		w.Write([]byte(why + "\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hasBody(r) { // no admin request has one; see answerAndClose
			resp := &http.Response{StatusCode: http.StatusBadRequest, ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"Connection": {"close"}}, Close: true, Body: http.NoBody, Request: r}
			if _, ok := answerAndClose(w, resp); ok {
				return
			}
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// The admin endpoint's own reserve. In a pod the integration can reach it,
// so it must stay up whatever the integration does to it or to its own
// listener: it holds at most adminMaxConns connections, request heads are
// small and must arrive quickly, and a newcomer past the cap evicts a
// connection that is not a request being answered (see idleQueue.victim),
// so neither idle sockets nor a churn of them can lock a probe out. Its
// descriptors are outside the Gate, which stops proxy connections well
// below RLIMIT_NOFILE.
const (
	adminMaxConns  = 32
	adminMaxHeader = 8 << 10
)

// adminHeaderTimeout bounds a request head's arrival. A variable only so
// that a test of eviction on a loaded machine is not a test of this clock.
var adminHeaderTimeout = 2 * time.Second

// ServeAdmin serves h on ln with the admin reserve until ln is closed.
func ServeAdmin(ln net.Listener, h http.Handler) error { return serveAdmin(ln, h, nil) }

// serveAdmin is ServeAdmin; onState, if not nil, is told every connection
// state change after the reserve has seen it (tests wait on it).
func serveAdmin(ln net.Listener, h http.Handler, onState func(net.Conn, http.ConnState)) error {
	q := &idleQueue{}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: adminHeaderTimeout,
		ReadTimeout:       adminHeaderTimeout,
		WriteTimeout:      10 * time.Second,
		MaxHeaderBytes:    adminMaxHeader,
		ErrorLog:          log.New(io.Discard, "", 0), // as every server of egressd's: nothing to the standard logger
		ConnState: func(c net.Conn, st http.ConnState) {
			q.track(c, st)
			if onState != nil {
				onState(c, st)
			}
		},
	}
	srv.SetKeepAlivesEnabled(false)
	err := srv.Serve(evictingListener{Listener: ln, q: q})
	if err == http.ErrServerClosed {
		return nil
	}
	return err
}

// idleQueue knows the admin connections open, in the order they were
// admitted, and picks which one a newcomer evicts when all slots are taken.
type idleQueue struct {
	mu       sync.Mutex
	open     []*adminConn
	admitted atomic.Uint64 // connections admitted so far
}

func (q *idleQueue) track(c net.Conn, st http.ConnState) {
	if st != http.StateClosed && st != http.StateHijacked {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, o := range q.open {
		if o == c {
			q.open = append(q.open[:i], q.open[i+1:]...)
			return
		}
	}
}

// admit counts c in, evicting a victim when full; false when every slot
// holds a request being answered.
func (q *idleQueue) admit(c *adminConn) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.admitted.Add(1)
	if len(q.open) >= adminMaxConns {
		i := q.victim(now)
		if i < 0 {
			return false
		}
		q.open[i].Conn.Close()
		q.open = append(q.open[:i], q.open[i+1:]...)
	}
	q.open = append(q.open, c)
	return true
}

// victim returns the index of the connection a newcomer evicts, or -1.
// First one that has sent no byte (nothing read, nothing queued in the
// kernel), oldest first: a churn of silent sockets only ever evicts its
// own. Then one whose request head is incomplete, oldest first: a client
// that drips its head loses to one that sent it. Then one stuck writing an
// answer its client does not read (a write begun before the previous
// newcomer came and not finished): a slow reader of /metrics would
// otherwise hold its slot for the write timeout. A connection whose head
// arrived, and whose answer is being made or was written at once, is
// never evicted: a probe always gets its answer.
func (q *idleQueue) victim(now uint64) int {
	for _, evictable := range []func(*adminConn) bool{
		func(c *adminConn) bool { return !c.sent.Load() && !bytesQueued(c.Conn) },
		func(c *adminConn) bool { return !c.head.Load() },
		func(c *adminConn) bool { w := c.writingSince.Load(); return w != 0 && w < now-1 },
	} {
		for i, c := range q.open {
			if evictable(c) {
				return i
			}
		}
	}
	return -1
}

// adminConn is an admin connection as the reserve judges it: whether a
// byte has been read from it, whether the blank line that ends a request
// head has, and since which admission a write to it has been under way.
type adminConn struct {
	net.Conn
	q            *idleQueue
	sent, head   atomic.Bool
	writingSince atomic.Uint64 // q.admitted when the write under way began; 0: none
	last         [2]byte       // the last bytes read; Read is never called concurrently
}

func (c *adminConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.head.Load() {
		c.sent.Store(true)
		for _, b := range p[:n] {
			// net/textproto ends a head at an empty line, CRLF or bare LF.
			if b == '\n' && (c.last[1] == '\n' || c.last == [2]byte{'\n', '\r'}) {
				c.head.Store(true)
				break
			}
			c.last = [2]byte{c.last[1], b}
		}
	}
	return n, err
}

func (c *adminConn) Write(p []byte) (int, error) {
	c.writingSince.Store(c.q.admitted.Load())
	defer c.writingSince.Store(0)
	return c.Conn.Write(p)
}

type evictingListener struct {
	net.Listener
	q *idleQueue
}

func (l evictingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ac := &adminConn{Conn: c, q: l.q}
		if l.q.admit(ac) {
			return ac, nil
		}
		c.Close()
	}
}
