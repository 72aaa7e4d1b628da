//go:build !linux

package proxy

import (
	"io"
	"net"
)

// pump is a plain copy where splice does not exist.
func pump(dst, src net.Conn) (int64, error) { return io.Copy(dst, src) }
