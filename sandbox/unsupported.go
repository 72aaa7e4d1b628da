//go:build !linux

package sandbox

import (
	"errors"
	"net"
	"os"
	"time"

	"github.com/egressd/egressd/internal/linejoin"
)

// ErrUnsupported: egressd run needs Linux namespaces. It never runs the
// child unsandboxed instead.
var ErrUnsupported = errors.New("egressd run is supported on Linux only; it never runs the program unsandboxed")

// ErrNamespaces means the kernel refused to create the namespaces.
var ErrNamespaces = ErrUnsupported

// InitArg is the argument that makes egressd run as the sandbox's init.
const InitArg = "__egressd-sandbox-init"

// Options are the supervisor's choices for one sandbox.
type Options struct {
	HostUID, HostGID int
	StateMount       *os.File
	Folder           *os.File
	Key              string
	Stderr           *linejoin.Joint
}

// OpenFolder always fails here.
func OpenFolder(string) (*os.File, error) { return nil, ErrUnsupported }

// FolderPath always fails here.
func FolderPath(*os.File) (string, error) { return "", ErrUnsupported }

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

func (*Sandbox) Run() error                     { return ErrUnsupported }
func (*Sandbox) Wait() int                      { return 125 }
func (*Sandbox) Signal(os.Signal) error         { return ErrUnsupported }
func (*Sandbox) Kill()                          {}
func (*Sandbox) Close()                         {}
func (*Sandbox) Stop(os.Signal, time.Duration)  {}
func (*Sandbox) InitDied() bool                 { return false }
func (*Sandbox) Escalated() bool                { return false }
func (*Sandbox) Breach() string                 { return "" }
func (*Sandbox) EgressDropped() (uint64, error) { return 0, ErrUnsupported }
func (*Sandbox) CgroupDirs() []string           { return nil }
func (*Sandbox) CgroupBounds() string           { return "" }

// ClaimStateFolder always fails here.
func ClaimStateFolder(string, string, string) (string, int, error) { return "", 0, ErrUnsupported }

// ClaimStateImage always fails here.
func ClaimStateImage(string, string, string) (string, error) { return "", ErrUnsupported }

// StateUse is what a state folder holds.
type StateUse struct {
	Bytes int64
	Files int
}

// TidyStateFolder always fails here.
func TidyStateFolder(string, int, int) (StateUse, error) { return StateUse{}, ErrUnsupported }

// Terminal is not saved here.
type Terminal struct{}

// SaveTerminal returns nil here.
func SaveTerminal() *Terminal { return nil }

// SaveStdioFlags returns nil here.
func SaveStdioFlags() *Terminal { return nil }

// Restore does nothing here.
func (*Terminal) Restore() error { return nil }

// MountStateImage always fails here.
func MountStateImage(string, int, int, string) (*os.File, error) { return nil, ErrUnsupported }
