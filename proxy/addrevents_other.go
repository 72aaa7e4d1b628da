//go:build !linux

package proxy

import (
	"context"
	"errors"
)

type addrEvents struct{}

func subscribeAddrEvents(context.Context) (*addrEvents, error) {
	return nil, errors.New("address events are followed on Linux only")
}

func (*addrEvents) Wait() error  { return errors.New("unsupported") }
func (*addrEvents) Close() error { return nil }
