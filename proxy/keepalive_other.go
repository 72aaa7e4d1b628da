//go:build !linux

package proxy

import "net"

// tcpListenConfig leaves keep-alive to Go, per accepted connection.
func tcpListenConfig() net.ListenConfig { return net.ListenConfig{} }
