package bounded

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAReadThatDoesNotReturnIsNotStartedAgainUntilItDoes: the first read
// of a key that blocks is given up at its deadline; the next reads of that
// key are refused at once without a new goroutine, while another key is
// read; once the blocked read returns, the key is read again.
func TestAReadThatDoesNotReturnIsNotStartedAgainUntilItDoes(t *testing.T) {
	var r Reads
	release := make(chan struct{})
	calls := 0
	blocked := func() int { calls++; <-release; return 1 }
	_, err := Run(context.Background(), &r, "stuck", 20*time.Millisecond, blocked)
	var nf *NotFinishedError
	if !errors.As(err, &nf) || nf.Earlier {
		t.Fatalf("first read: %v, want a deadline error", err)
	}
	for range 3 {
		if _, err := Run(context.Background(), &r, "stuck", time.Hour, blocked); !errors.As(err, &nf) || !nf.Earlier {
			t.Fatalf("read while the first is stuck: %v, want refused at once", err)
		}
	}
	if got, err := Run(context.Background(), &r, "other", time.Hour, func() int { return 2 }); err != nil || got != 2 {
		t.Fatalf("another key: %d %v", got, err)
	}
	if stuck := r.Stuck(0); len(stuck) != 1 || stuck[0] != "stuck" {
		t.Fatalf("Stuck: %v", stuck)
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for len(r.Stuck(0)) > 0 { // the read returns on its goroutine
		if time.Now().After(deadline) {
			t.Fatal("the released read never returned")
		}
		time.Sleep(time.Millisecond)
	}
	if got, err := Run(context.Background(), &r, "stuck", time.Hour, func() int { calls++; return 3 }); err != nil || got != 3 {
		t.Fatalf("after it returned: %d %v", got, err)
	}
	if calls != 2 {
		t.Fatalf("read called %d times, want 2 (once stuck, once after)", calls)
	}
}

// TestARunEndsWithItsContext: a read still running when ctx ends is left
// behind and the caller gets ctx's error.
func TestARunEndsWithItsContext(t *testing.T) {
	var r Reads
	release := make(chan struct{})
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	go func() { <-started; cancel() }()
	_, err := Run(ctx, &r, "k", time.Hour, func() int { close(started); <-release; return 0 })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want context.Canceled", err)
	}
}
