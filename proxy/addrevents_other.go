//go:build !linux

package proxy

import (
	"context"
	"time"
)

// addrEvents, where there is no netlink, is a clock: the caller re-reads
// the host's addresses every addrPoll. An address added in between is
// still caught after the dial (policy.CheckDialled).
type addrEvents struct {
	ctx  context.Context
	tick *time.Ticker
}

const addrPoll = 2 * time.Second

func subscribeAddrEvents(ctx context.Context) (*addrEvents, error) {
	return &addrEvents{ctx: ctx, tick: time.NewTicker(addrPoll)}, nil
}

func (e *addrEvents) Wait() error {
	select {
	case <-e.tick.C:
		return nil
	case <-e.ctx.Done():
		return e.ctx.Err()
	}
}

func (e *addrEvents) Close() error { e.tick.Stop(); return nil }
