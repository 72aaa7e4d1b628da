// Package bounded runs reads of files an integration's author controls
// with a deadline. Such a path can lead into a file system that never
// answers (a FUSE mount whose daemon does not read its requests, a hung
// network mount): stat and open then block in the kernel, uninterruptibly,
// before any check of the file can refuse it, and no context can cancel
// them. So the read runs on a goroutine of its own and the caller stops
// waiting at the deadline or when its context ends.
//
// A read that never returns keeps its goroutine (and its thread) for good;
// that thread takes none of the process's signals (shieldThread).
// To bound them, a key whose read has not returned is not read again until
// it does: one stuck goroutine per key at most.
package bounded

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Reads tracks the reads in progress, by key. The zero value is ready.
type Reads struct {
	mu   sync.Mutex
	busy map[string]time.Time // key -> when its read began
}

// NotFinishedError says a read did not return in time, or that the read
// of the same key begun earlier has still not returned.
type NotFinishedError struct {
	Key     string
	Timeout time.Duration // the deadline this read was given
	Since   time.Time     // when the read still running began
	Earlier bool          // an earlier read of Key is still running; this one was not started
}

func (e *NotFinishedError) Error() string {
	if e.Earlier {
		return fmt.Sprintf("the read of %s begun %s ago has not finished (a file system that does not answer?); it is not read again until that read returns",
			e.Key, time.Since(e.Since).Round(time.Second))
	}
	return fmt.Sprintf("reading %s did not finish within %s (a file system that does not answer?); it is not read again until that read returns", e.Key, e.Timeout)
}

// Run calls read on a goroutine of its own and returns what it returns,
// or a *NotFinishedError once timeout passes, or ctx's error once ctx
// ends. While an earlier read of key has not returned, it does not call
// read at all and returns a *NotFinishedError at once.
func Run[T any](ctx context.Context, r *Reads, key string, timeout time.Duration, read func() T) (T, error) {
	var zero T
	r.mu.Lock()
	if since, busy := r.busy[key]; busy {
		r.mu.Unlock()
		return zero, &NotFinishedError{Key: key, Timeout: timeout, Since: since, Earlier: true}
	}
	if r.busy == nil {
		r.busy = map[string]time.Time{}
	}
	began := time.Now()
	r.busy[key] = began
	r.mu.Unlock()
	done := make(chan T, 1) // buffered: a read that returns late never blocks
	go func() {
		restore := shieldThread()
		v := read()
		restore()
		r.mu.Lock()
		delete(r.busy, key)
		r.mu.Unlock()
		done <- v
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-done:
		return v, nil
	case <-timer.C:
		return zero, &NotFinishedError{Key: key, Timeout: timeout, Since: began}
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// Stuck returns the keys whose read began more than after ago and has not
// returned.
func (r *Reads) Stuck(after time.Duration) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for key, since := range r.busy {
		if time.Since(since) > after {
			out = append(out, key)
		}
	}
	return out
}
