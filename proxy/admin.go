package proxy

import (
	"context"
	"net"
	"net/http"
	"sync"
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
	return mux
}

// The admin endpoint's own reserve. In a pod the integration can reach it,
// so it must stay up whatever the integration does to it or to its own
// listener: it holds at most adminMaxConns connections, and a new one
// evicts the longest-waiting connection that has not sent its request, so
// idle sockets cannot lock a probe out; request heads are small and must
// arrive quickly. Its descriptors are outside the Gate, which stops proxy
// connections well below RLIMIT_NOFILE.
const (
	adminMaxConns      = 32
	adminHeaderTimeout = 2 * time.Second
	adminMaxHeader     = 8 << 10
)

// ServeAdmin serves h on ln with the admin reserve until ln is closed.
func ServeAdmin(ln net.Listener, h http.Handler) error { return serveAdmin(ln, h, nil) }

// serveAdmin is ServeAdmin; onState, if not nil, is told every connection
// state change after the reserve has seen it (tests wait on it).
func serveAdmin(ln net.Listener, h http.Handler, onState func(net.Conn, http.ConnState)) error {
	q := &idleQueue{}
	srv := &http.Server{
		Handler:           q.serving(h),
		ReadHeaderTimeout: adminHeaderTimeout,
		ReadTimeout:       adminHeaderTimeout,
		WriteTimeout:      10 * time.Second,
		MaxHeaderBytes:    adminMaxHeader,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, adminConnKey{}, c)
		},
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

// idleQueue knows the admin connections open: those still waiting for
// their request, and those being served, each oldest first. A connection
// waits until its request head is complete and the handler runs, not
// merely until its first byte (net/http's StateActive): a client that
// drips a byte at a time is idle as far as the reserve is concerned, and
// is evicted first. When every slot is serving, the connection served
// longest goes: the admin answers are small and written at once, so a
// connection still being served is one whose client does not read (a
// slow reader of /metrics would otherwise hold its slot for the write
// timeout).
type idleQueue struct {
	mu      sync.Mutex
	open    map[net.Conn]bool
	waiting []net.Conn
	served  []net.Conn
}

// adminConnKey carries a request's connection in its context, so the
// handler can tell the queue the request is complete.
type adminConnKey struct{}

// serving wraps h so a connection moves from waiting to served once its
// request has been read whole.
func (q *idleQueue) serving(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(adminConnKey{}).(net.Conn); ok {
			q.mu.Lock()
			if q.open[c] {
				q.waiting = without(q.waiting, c)
				q.served = append(q.served, c)
			}
			q.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (q *idleQueue) track(c net.Conn, st http.ConnState) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if st == http.StateClosed || st == http.StateHijacked {
		q.waiting, q.served = without(q.waiting, c), without(q.served, c)
		delete(q.open, c)
	}
}

func without(list []net.Conn, c net.Conn) []net.Conn {
	for i, w := range list {
		if w == c {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

// admit counts c in. When full, it evicts the oldest waiting connection,
// or else the one served longest.
func (q *idleQueue) admit(c net.Conn) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.open == nil {
		q.open = map[net.Conn]bool{}
	}
	if len(q.open) >= adminMaxConns {
		var victim net.Conn
		switch {
		case len(q.waiting) > 0:
			victim, q.waiting = q.waiting[0], q.waiting[1:]
		case len(q.served) > 0:
			victim, q.served = q.served[0], q.served[1:]
		default:
			return false
		}
		victim.Close()
		delete(q.open, victim)
	}
	q.open[c] = true
	q.waiting = append(q.waiting, c)
	return true
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
		if l.q.admit(c) {
			return c, nil
		}
		c.Close()
	}
}
