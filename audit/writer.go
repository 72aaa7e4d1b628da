package audit

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
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
	// Checkpoint, if set, receives a {seq, hash} checkpoint line every
	// CheckpointEvery lines (default 1000) and at rotation and close. Point
	// it at a sink the log's writer cannot rewrite (stderr to journald, the
	// log pipeline): with checkpoints, an unkeyed chain rewritten after an
	// edit is caught.
	Checkpoint      io.Writer
	CheckpointEvery int
	// RunLink, for a log written to a stream rather than a *File (stdout),
	// or to a new, empty file of the run's own (egressd run), is a file in
	// the state folder remembering the last hash of the run before, so the
	// genesis can name it as prev_run (see runlink.go). Without it a stream
	// log's genesis says prev_run=unknown.
	RunLink string
	// OnFailure, if set, is called once, with the error, when the first
	// write fails: the operator must hear of it at once, not at the next
	// look at /readyz.
	OnFailure func(error)
	// Integration names what the log is written for: for egressd run the
	// stem of the run's files (the integration id, or ID@claim), for serve
	// "serve". The genesis and every checkpoint name it, so verify can
	// tell the checkpoints of the files given from those of other logs
	// sharing the journal (see ofOtherIntegration).
	Integration string
}

// Log writes audit events as hash-chained JSON lines. It is safe for
// concurrent use; lines are written whole, one Write call each, in seq order.
type Log struct {
	mu      sync.Mutex
	out     io.Writer
	buf     bytes.Buffer
	scratch scratch
	zl      zerolog.Logger
	chain   chain
	chainID string
	now     func() time.Time
	gen     func() uint64
	host    string
	keyID   string
	ckpt    io.Writer
	ckEvery uint64
	onFail  func(error)
	runLink string // the state folder's link file, for a stream log
	name    string // Options.Integration, when it is one msg field
	ckName  string // its JSON-quoted checkpoint field, or ""
	rolling bool   // the *File out is full; RollIfFull rotates it
	failed  atomic.Bool
	lastErr atomic.Value // error
}

// New starts a chain on out and writes its genesis record. The caller owns
// out; Close writes the clean-shutdown record but does not close out.
func New(out io.Writer, opts Options) (*Log, error) {
	l := &Log{out: out, now: opts.Now, gen: opts.Generation, chain: newChain(opts.Key, opts.Prev), chainID: newChainID(),
		keyID: keyIDOrNone(opts.Key, opts.KeyID), ckpt: opts.Checkpoint, ckEvery: uint64(opts.CheckpointEvery), onFail: opts.OnFailure}
	if l.now == nil {
		l.now = time.Now
	}
	if l.ckEvery == 0 {
		l.ckEvery = 1000
	}
	if n := opts.Integration; n != "" && !strings.ContainsAny(n, " \t\n\r=\"\\") {
		q, _ := json.Marshal(n)
		l.name, l.ckName = n, `,"integration":`+string(q)
	}
	l.zl = zerolog.New(&l.buf)
	l.host, _ = os.Hostname()
	g := l.genesis(opts.Prev)
	if opts.Prev == "" {
		// A new run names the run before it: the last line of the file it
		// is appended to, or for a stream the last hash the state folder
		// remembers.
		prevRun := "unknown"
		f, isFile := out.(*File)
		if isFile {
			prevRun = f.tail
		}
		// A file of its own (egressd run's ID.PID.log) starts empty: the
		// run before it is the one the link file remembers.
		ownFile := isFile && prevRun == "none" && opts.RunLink != ""
		prevOpen := ""
		if opts.RunLink != "" && (!isFile || prevRun == "none") {
			// The lock is held until the genesis is written: runs of one
			// id then name each other in the order of their genesis
			// times, the order audit verify wants their files in.
			lock, err := lockRunLink(opts.RunLink)
			if err != nil {
				return nil, fmt.Errorf("audit: remembering the run in %s: %w", opts.RunLink, err)
			}
			defer lock.Close()
			var open string
			prevRun, open = readRunLink(opts.RunLink)
			if open != "" {
				prevOpen = " prev_open=" + open
			}
			if err := writeRunLink(opts.RunLink, "open "+l.chainID); err != nil {
				return nil, fmt.Errorf("audit: remembering the run in %s: %w", opts.RunLink, err)
			}
			l.runLink = opts.RunLink
		}
		g.Msg += " prev_run=" + prevRun + prevOpen
		if ownFile {
			// The file holds this run alone: verify refuses any other
			// chain beside it, so a later run appended to this file by
			// someone without the key cannot ride along when this run's
			// file is pruned (see OwnFile).
			g.Msg += " file=" + OwnFile
		}
	}
	if err := l.Write(g); err != nil {
		return l, err
	}
	// A checkpoint of the genesis says the sink covers this run from its
	// start: a run with no shutdown record whose checkpoints end at or
	// before its last line crashed there, while a clean run cut back to
	// pass as a crash has its close checkpoint past the cut (see
	// CrashesProven).
	if l.ckEvery != 1 {
		l.checkpoint()
	}
	return l, nil
}

func (l *Log) genesis(prev string) Event {
	msg := fmt.Sprintf("chain=%s host=%s pid=%d key_id=%s prev_file_hash=%s", l.chainID, l.host, os.Getpid(), l.keyID, orNone(prev))
	if l.name != "" {
		msg += " integration=" + l.name
	}
	return Event{Kind: Lifecycle, Action: "genesis", Msg: msg}
}

// Rotate ends the current file with a rotation record and continues the
// chain in out, which starts with a genesis record linking back to it. The
// caller closes the old file after Rotate returns.
func (l *Log) Rotate(out io.Writer) error {
	if err := l.Write(Event{Kind: Lifecycle, Action: "rotate", Msg: "chain=" + l.chainID}); err != nil {
		return err
	}
	l.mu.Lock()
	l.out = out
	prev := l.chain.prev
	l.mu.Unlock()
	l.checkpoint()
	return l.Write(l.genesis(prev))
}

// checkpoint writes {seq, hash} to the checkpoint sink.
func (l *Log) checkpoint() {
	if l.ckpt == nil {
		return
	}
	seq, hash := l.LastHash()
	fmt.Fprintf(l.ckpt, "{\"event\":\"checkpoint\",\"chain\":%q,\"seq\":%d,\"hash\":%q%s}\n", l.chainID, seq, hash, l.ckName)
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
	encode(l.zl, e, &l.scratch)
	line := l.chain.seal(l.buf.Bytes())
	if _, err := l.out.Write(line); err != nil {
		if l.failed.CompareAndSwap(false, true) {
			l.lastErr.Store(err)
			if l.onFail != nil {
				l.onFail(err)
			}
		}
		return fmt.Errorf("audit: write: %w", err)
	}
	l.chain.advance(line)
	if l.ckpt != nil && l.chain.seq%l.ckEvery == 0 {
		fmt.Fprintf(l.ckpt, "{\"event\":\"checkpoint\",\"chain\":%q,\"seq\":%d,\"hash\":%q%s}\n", l.chainID, l.chain.seq, l.chain.prev, l.ckName)
	}
	if f, ok := l.out.(*File); ok && f.Full() && e.Action != "rotate" {
		l.rolling = true
	}
	return nil
}

// RollIfFull rotates a *File that reached its size limit. The proxy calls
// it outside any hot path (once a second); a log over its limit for that
// long is fine.
func (l *Log) RollIfFull() error {
	l.mu.Lock()
	f, ok := l.out.(*File)
	full := ok && l.rolling
	l.rolling = false
	l.mu.Unlock()
	if !full {
		return nil
	}
	next, err := f.Roll(l.now())
	if err != nil {
		return err
	}
	if err := l.Rotate(next); err != nil {
		return err
	}
	return f.Close()
}

// Close writes the clean-shutdown record. A chain without one, and without a
// continuation, was cut off.
func (l *Log) Close() error {
	err := l.Write(Event{Kind: Lifecycle, Action: "shutdown", Msg: "chain=" + l.chainID})
	l.checkpoint()
	if err == nil && l.runLink != "" {
		_, hash := l.LastHash()
		if lerr := closeRunLink(l.runLink, l.chainID, hash); lerr != nil {
			return &LinkError{Path: l.runLink, Err: lerr}
		}
	}
	return err
}

// LinkError is Close's error when the chain closed cleanly but the link
// file (Options.RunLink) could not record its end. The file still says
// the run is open, so the next run's genesis names this run only as open
// when it started (prev_open), as after a crash: verify still requires
// this run right before it, but its end is no longer named by hash.
type LinkError struct {
	Path string
	Err  error
}

func (e *LinkError) Error() string {
	return fmt.Sprintf("the audit log closed cleanly, but %s was not updated (%v): it still says this run is open, so the next run names it only as open when it started, as after a crash (verify still checks that this run comes right before it); make that folder writable", e.Path, e.Err)
}

func (e *LinkError) Unwrap() error { return e.Err }

func level(e Event) zerolog.Level {
	switch {
	case e.Err != "":
		return zerolog.ErrorLevel
	case e.Decision == "deny" || e.Decision == "would_deny":
		return zerolog.WarnLevel
	}
	return zerolog.InfoLevel
}

// scratch holds what encode formats before zerolog copies it into the
// line, kept between lines so that a line allocates nothing for it. The
// Log's mutex serialises every use.
type scratch struct{ time, hostRaw []byte }

// encode writes e's non-zero fields, capped, through zerolog.
func encode(zl zerolog.Logger, e Event, sc *scratch) {
	sc.time = e.Time.UTC().AppendFormat(sc.time[:0], time.RFC3339Nano)
	ev := zl.WithLevel(level(e)).Bytes("time", sc.time).Str("event", string(e.Kind))
	str := func(k, v string) {
		if v != "" {
			ev.Str(k, Cap(v, maxField))
		}
	}
	id := func(k, v string) {
		if v != "" {
			ev.Str(k, CapIdentity(v))
		}
	}
	id("integration", e.Integration)
	id("integration_version", e.IntegrationVersion)
	id("claim", e.Claim)
	if e.Generation != 0 {
		ev.Uint64("generation", e.Generation)
	}
	str("decision", e.Decision)
	str("reason", e.Reason)
	str("host", e.Host)
	if e.HostRaw != "" {
		sc.hostRaw = appendQuotedRaw(sc.hostRaw[:0], e.HostRaw)
		ev.Bytes("host_raw", sc.hostRaw)
	}
	if e.Port != 0 {
		ev.Uint16("port", e.Port)
	}
	str("rule", e.Rule)
	str("sni", e.SNI)
	if e.SNIRaw != "" {
		sc.hostRaw = appendQuotedRaw(sc.hostRaw[:0], e.SNIRaw)
		ev.Bytes("sni_raw", sc.hostRaw)
	}
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
	if e.Req != 0 {
		ev.Uint64("req", e.Req)
	}
	str("method", e.Method)
	str("path", e.Path)
	if e.Status != 0 {
		ev.Int("status", e.Status)
	}
	if len(e.Secrets) > 0 {
		var names []string
		for _, n := range e.Secrets[:min(len(e.Secrets), maxList)] {
			names = append(names, Cap(n, maxField))
		}
		ev.Strs("secrets", names)
	}
	if e.Kind == Response || e.Kind == Request && e.BytesUp+e.BytesDown != 0 {
		ev.Int64("bytes_up", e.BytesUp).Int64("bytes_down", e.BytesDown)
	}
	if e.Kind == Close {
		ev.Int64("bytes_up", e.BytesUp).Int64("bytes_down", e.BytesDown).Int64("duration_ms", e.DurationMS)
		if e.HelloBytes != 0 {
			ev.Int64("hello_bytes", e.HelloBytes)
		}
	}
	if e.Suppressed != 0 {
		ev.Int64("suppressed", e.Suppressed)
	}
	if len(e.Folded) > 0 {
		folded, _ := json.Marshal(e.Folded)
		ev.RawJSON("folded", folded)
	}
	if e.Unlisted != 0 {
		ev.Int64("unlisted", e.Unlisted)
	}
	if len(e.UnlistedRules) > 0 {
		rules, _ := json.Marshal(e.UnlistedRules)
		ev.RawJSON("unlisted_rules", rules)
	}
	str("listener", e.Listener)
	str("action", e.Action)
	id("pending", e.Pending)
	id("manifest", e.Manifest)
	if e.Kind == Policy && e.Entries != nil && len(e.Entries) <= MaxPolicyEntries {
		entries := make([]string, len(e.Entries))
		for i, en := range e.Entries {
			entries[i] = CapIdentity(en)
		}
		ev.Strs("entries", entries)
	}
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
