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

// idleQueue knows the admin connections open, and which of them are
// still waiting for their request, oldest first. A connection waits until
// its request head is complete and the handler runs, not merely until its
// first byte (net/http's StateActive): a client that drips a byte at a time
// is idle as far as the reserve is concerned, and is evicted first.
type idleQueue struct {
	mu      sync.Mutex
	open    map[net.Conn]bool
	waiting []net.Conn
}

// adminConnKey carries a request's connection in its context, so the
// handler can tell the queue the request is complete.
type adminConnKey struct{}

// serving wraps h so a connection stops being evictable once its request
// has been read whole.
func (q *idleQueue) serving(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(adminConnKey{}).(net.Conn); ok {
			q.mu.Lock()
			q.drop(c)
			q.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (q *idleQueue) track(c net.Conn, st http.ConnState) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if st == http.StateClosed || st == http.StateHijacked {
		q.drop(c)
		delete(q.open, c)
	}
}

func (q *idleQueue) drop(c net.Conn) {
	for i, w := range q.waiting {
		if w == c {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			return
		}
	}
}

// admit counts c in, evicting the oldest waiting connection when full. It
// reports false when every connection is busy serving a request.
func (q *idleQueue) admit(c net.Conn) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.open == nil {
		q.open = map[net.Conn]bool{}
	}
	if len(q.open) >= adminMaxConns {
		if len(q.waiting) == 0 {
			return false
		}
		oldest := q.waiting[0]
		oldest.Close()
		delete(q.open, oldest)
		q.waiting = q.waiting[1:]
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
