//go:build !linux

package proxy

import "net"

// trafficCounters is not available here; idle tunnels are then bounded by
// the lifetime timeout only.
func trafficCounters(*net.TCPConn) (sent, received uint64, ok bool) { return 0, 0, false }

// bytesQueued is unknown here: only bytes read count as sent.
func bytesQueued(net.Conn) bool { return false }
