//go:build !linux

package sandbox

import (
	"errors"
	"net"
	"os"
)

// ErrUnsupported: egressd run needs Linux namespaces. It never runs the
// child unsandboxed instead.
var ErrUnsupported = errors.New("egressd run is supported on Linux only; it never runs the program unsandboxed")

// ErrNamespaces means the kernel refused to create the namespaces.
var ErrNamespaces = ErrUnsupported

// InitArg is the argument that makes egressd run as the sandbox's init.
const InitArg = "__egressd-sandbox-init"

// Options are the supervisor's choices for one sandbox.
type Options struct{ HostUID, HostGID int }

// Sandbox is not available on this system.
type Sandbox struct {
	Proxy   net.Listener
	Capture map[uint16]net.Listener
	DNSUDP  net.PacketConn
	DNSTCP  net.Listener
	Egress  *os.File
}

// Start always fails here.
func Start(Spec, Options) (*Sandbox, error) { return nil, ErrUnsupported }

// InitMain always fails here.
func InitMain() int { return 125 }

func (*Sandbox) Run() error             { return ErrUnsupported }
func (*Sandbox) Wait() int              { return 125 }
func (*Sandbox) Signal(os.Signal) error { return ErrUnsupported }
func (*Sandbox) Kill()                  {}
func (*Sandbox) Close()                 {}
