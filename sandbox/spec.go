package sandbox

// Spec is what the init inside the sandbox needs. The supervisor sends it
// over the control socket; nothing else crosses.
type Spec struct {
	Command string   // resolved absolute path of the program
	Args    []string // argv, Args[0] included
	Dir     string   // working directory: the integration folder
	// DirID is the identity of the folder egressd opened (Options.Folder):
	// an init that opens Dir by name binds it only if it is that folder.
	DirID FileID
	Env   []string // the whole environment, built by BuildEnv
	// ReadOnly are host paths bound read-only at the same path: the
	// integration folder and, when it is outside the system folders and
	// that folder, the program's executable file alone.
	ReadOnly []string
	// StateDir is the host folder bound writable at /var/lib/integration.
	StateDir string
	// CapturePorts get transparent capture listeners: 443 and each
	// exempted port.
	CapturePorts []uint16
	// Limits bound what the program can consume; every field must be set.
	Limits Limits
	// AllowSetsid lets the program start sessions of its own. Set it only
	// where a cgroup bounds the sandbox's CPU: otherwise the kernel's
	// autogroup, one scheduler group per session, is the bound, and each
	// new session would be a CPU share of its own. The zero value refuses.
	AllowSetsid bool
	// TrustBundle, when set, is a host file of PEM certificates (the
	// host's roots and egressd's broker CA) bound read-only at
	// TrustBundlePath and over the system bundles the sandbox has.
	TrustBundle string
}

// Fixed places inside the sandbox.
const (
	ProxyAddr = "127.0.0.1:3128"
	DNSAddr   = "127.0.0.53:53"
	Home      = "/home/sandbox"
	StateDir  = "/var/lib/integration"
	Hostname  = "sandbox"
	// TrustBundlePath is where Spec.TrustBundle is inside the sandbox.
	TrustBundlePath = "/etc/egressd/ca-certificates.crt"
)

// Listener names in the fd-passing message.
const (
	nameProxy     = "proxy"
	nameDNSU      = "dns-udp"
	nameDNST      = "dns-tcp"
	capturePrefix = "capture:"
	nameEgress    = "egress" // the TUN file behind egress0, not a listener
)

// FileID names a file by its device and inode: what a descriptor opened
// in another mount namespace can be compared by.
type FileID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}
