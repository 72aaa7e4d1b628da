package audit

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Options configure a Log.
type Options struct {
	// Key, if set, keys the hash chain with HMAC-SHA-256, so a line cannot
	// be forged by anyone without it. KeyID names the key in the genesis
	// record. With no Key the chain is plain SHA-256: it detects corruption,
	// not forgery.
	Key   []byte
	KeyID string
	// Prev is the last hash of the previous file, linking a rotated log.
	Prev string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Generation, if set, stamps the current policy generation on every
	// event that does not carry its own.
	Generation func() uint64
}

// Log writes audit events as hash-chained JSON lines. It is safe for
// concurrent use; lines are written whole, one Write call each, in seq order.
type Log struct {
	mu      sync.Mutex
	out     io.Writer
	buf     bytes.Buffer
	zl      zerolog.Logger
	chain   chain
	chainID string
	now     func() time.Time
	gen     func() uint64
	failed  atomic.Bool
	lastErr atomic.Value // error
}

// New starts a chain on out and writes its genesis record. The caller owns
// out; Close writes the clean-shutdown record but does not close out.
func New(out io.Writer, opts Options) (*Log, error) {
	l := &Log{out: out, now: opts.Now, gen: opts.Generation, chain: newChain(opts.Key, opts.Prev), chainID: newChainID()}
	if l.now == nil {
		l.now = time.Now
	}
	l.zl = zerolog.New(&l.buf)
	host, _ := os.Hostname()
	err := l.Write(Event{Kind: Lifecycle, Action: "genesis", Msg: fmt.Sprintf("chain=%s host=%s pid=%d key_id=%s prev_file_hash=%s", l.chainID, host, os.Getpid(), keyIDOrNone(opts.Key, opts.KeyID), orNone(opts.Prev))})
	return l, err
}

// OpenFile opens path for appending, creating it with mode 0600.
func OpenFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
}

// Healthy reports whether every write so far succeeded. Once a write fails
// the log stays unhealthy: the chain has a gap a reviewer must see.
func (l *Log) Healthy() bool { return !l.failed.Load() }

// Err returns the first write error, or nil.
func (l *Log) Err() error {
	if e, ok := l.lastErr.Load().(error); ok {
		return e
	}
	return nil
}

// LastHash returns the hash of the last line written, for a rotation link
// or a checkpoint.
func (l *Log) LastHash() (seq uint64, hash string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.chain.seq, l.chain.prev
}

// Write appends one event. The returned error means the line is not on
// disk; callers that must not act without a record check it.
func (l *Log) Write(e Event) error {
	if e.Time.IsZero() {
		e.Time = l.now()
	}
	if e.Generation == 0 && l.gen != nil {
		e.Generation = l.gen()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Reset()
	encode(l.zl, e)
	line := l.chain.seal(l.buf.Bytes())
	if _, err := l.out.Write(line); err != nil {
		if l.failed.CompareAndSwap(false, true) {
			l.lastErr.Store(err)
		}
		return fmt.Errorf("audit: write: %w", err)
	}
	l.chain.advance(line)
	return nil
}

// Close writes the clean-shutdown record. A chain without one, and without a
// continuation, was cut off.
func (l *Log) Close() error {
	return l.Write(Event{Kind: Lifecycle, Action: "shutdown", Msg: "chain=" + l.chainID})
}

func level(e Event) zerolog.Level {
	switch {
	case e.Err != "":
		return zerolog.ErrorLevel
	case e.Decision == "deny" || e.Decision == "would_deny":
		return zerolog.WarnLevel
	}
	return zerolog.InfoLevel
}

// encode writes e's non-zero fields, capped, through zerolog.
func encode(zl zerolog.Logger, e Event) {
	ev := zl.WithLevel(level(e)).Str("time", e.Time.UTC().Format(time.RFC3339Nano)).Str("event", string(e.Kind))
	str := func(k, v string) {
		if v != "" {
			ev.Str(k, Cap(v, maxField))
		}
	}
	str("integration", e.Integration)
	str("integration_version", e.IntegrationVersion)
	if e.Generation != 0 {
		ev.Uint64("generation", e.Generation)
	}
	str("decision", e.Decision)
	str("reason", e.Reason)
	str("host", e.Host)
	if e.HostRaw != "" {
		ev.Str("host_raw", quoteRaw(e.HostRaw))
	}
	if e.Port != 0 {
		ev.Uint16("port", e.Port)
	}
	str("rule", e.Rule)
	str("addr", e.Addr)
	if len(e.CNAME) > 0 {
		c := e.CNAME
		if len(c) > maxList {
			c = c[:maxList]
		}
		ev.Strs("cname", c)
	}
	str("exemption", e.Exemption)
	str("conn", e.Conn)
	str("method", e.Method)
	if e.Kind == Close {
		ev.Int64("bytes_up", e.BytesUp).Int64("bytes_down", e.BytesDown).Int64("duration_ms", e.DurationMS)
	}
	if e.Suppressed != 0 {
		ev.Int64("suppressed", e.Suppressed)
	}
	str("listener", e.Listener)
	str("action", e.Action)
	str("pending", e.Pending)
	str("msg", e.Msg)
	str("error", e.Err)
	ev.Send()
}

func newChainID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func keyIDOrNone(key []byte, id string) string {
	if key == nil {
		return "none"
	}
	if id == "" {
		return "unnamed"
	}
	return id
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// ErrUnavailable is returned for connections refused because the audit log
// cannot be written.
var ErrUnavailable = errors.New("audit log unavailable")
