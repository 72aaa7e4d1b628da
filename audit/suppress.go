package audit

import (
	"sync"
	"time"
)

// Suppressor folds repeated identical denials into one line: the first is
// written at once, and the rest within the window are counted and written as
// one event with "suppressed": N when the window ends. A flood of refused
// connections costs the log one line per second per kind, not one per packet.
type Suppressor struct {
	log    *Log
	window time.Duration
	now    func() time.Time

	mu      sync.Mutex
	pending map[string]*folded
}

type folded struct {
	proto Event
	until time.Time
	count int64
}

// maxFolded bounds the keys held; past it everything pending is flushed.
const maxFolded = 4096

// NewSuppressor folds over window (one second is a good default).
func NewSuppressor(l *Log, window time.Duration) *Suppressor {
	return &Suppressor{log: l, window: window, now: time.Now, pending: map[string]*folded{}}
}

// Write writes e, or counts it if an identical key was written within the
// window. A counted event is not lost: it is in the next summary line.
func (s *Suppressor) Write(key string, e Event) error {
	now := s.now()
	s.mu.Lock()
	f, ok := s.pending[key]
	if ok && now.Before(f.until) {
		f.count++
		s.mu.Unlock()
		return s.log.Err()
	}
	var summary *Event
	if ok && f.count > 0 {
		summary = f.summary()
	}
	if len(s.pending) >= maxFolded {
		s.flushLocked(now, true)
	}
	s.pending[key] = &folded{proto: e, until: now.Add(s.window)}
	s.mu.Unlock()
	if summary != nil {
		s.log.Write(*summary)
	}
	return s.log.Write(e)
}

// Flush writes the summaries of windows that have ended; all of them if
// force is set (at shutdown).
func (s *Suppressor) Flush(force bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked(s.now(), force)
}

func (s *Suppressor) flushLocked(now time.Time, force bool) {
	for k, f := range s.pending {
		if !force && now.Before(f.until) {
			continue
		}
		if f.count > 0 {
			s.log.Write(*f.summary())
		}
		delete(s.pending, k)
	}
}

func (f *folded) summary() *Event {
	e := f.proto
	e.Time, e.Conn, e.HostRaw, e.Suppressed = time.Time{}, "", "", f.count
	return &e
}
