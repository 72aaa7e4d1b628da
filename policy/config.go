package policy

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/sandbox"
	"github.com/gobwas/glob"
)

// Config is the operator's configuration, parsed into plain values. It holds
// no runtime state. The zero Config is not valid: use DefaultConfig or
// ParseConfig, which fill in the defaults.
type Config struct {
	StateDir  string   // version memory; "" means the default for the user
	Admin     string   // admin listener address; "" means off
	Resolvers []string // upstream DNS servers, host:port; empty means /etc/resolv.conf
	Mode      Mode     // default mode for integrations that set none
	Audit     AuditConfig
	Limits    Limits
	Timeouts  Timeouts
	Deny      OperatorDeny
	// Sandbox bounds what the program "egressd run" starts can take from
	// the host: processes, memory, descriptors, file size, tmpfs sizes.
	Sandbox sandbox.Limits
	// NAT64 prefixes, beyond DefaultNAT64, whose addresses are judged by the
	// IPv4 address where RFC 6052 puts it for the prefix's length.
	NAT64 []netip.Prefix
	Rules allowlist.Rules
	// EnvPassthrough names launcher variables "egressd run" passes to the
	// program besides those its manifest declares.
	EnvPassthrough []string
	Integrations   []Integration
	// TLS is the broker's CA and the extra roots origins are verified with
	// (tls:), read by "egressd serve" at start.
	TLS TLSFiles
	// ManifestDirs serve every integration folder inside a folder; LoadConfig
	// expands them into Integrations.
	ManifestDirs []ManifestDir
}

// ManifestDir is a folder of integration folders, each served on the
// template's listener with {name} replaced by the folder's name.
type ManifestDir struct {
	Dir      string
	Template Integration
}

// Mode is enforce or audit.
type Mode uint8

const (
	// Enforce is the zero Mode: refusals are refusals.
	Enforce Mode = iota
	// Audit lets not_allowlisted connections through as would_deny. It is a
	// named exemption, warned about and stamped on every event it affects.
	Audit
)

func (m Mode) String() string {
	if m == Audit {
		return "audit"
	}
	return "enforce"
}

// ParseMode reads "enforce" or "audit".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "enforce", "":
		return Enforce, nil
	case "audit":
		return Audit, nil
	}
	return Enforce, fmt.Errorf("must be \"enforce\" or \"audit\" (%q)", s)
}

// OnFailure says what happens to new connections when the audit log cannot
// be written.
type OnFailure uint8

const (
	// DenyOnAuditFailure refuses new connections with audit_unavailable:
	// nothing is allowed without a record. It is the zero value.
	DenyOnAuditFailure OnFailure = iota
	// ContinueOnAuditFailure is the operator's explicit opt-out.
	ContinueOnAuditFailure
)

// AuditConfig says where decisions are written.
type AuditConfig struct {
	Path      string // file path, or "-" for stdout
	OnFailure OnFailure
	// MaxSizeMB rolls the file over at this size; 0 leaves rotation to
	// logrotate (SIGUSR1 reopens the path).
	MaxSizeMB int
	// KeyFile holds the HMAC key for the chain ($VARS expanded, so
	// "$CREDENTIALS_DIRECTORY/audit-key" works under LoadCredential=).
	// KeyID names it in each genesis record.
	KeyFile string
	KeyID   string
	// Checkpoints is where {seq, hash} checkpoints go: "stderr" or "none".
	Checkpoints string
}

// Limits are per-integration connection limits, plus one global cap.
type Limits struct {
	ConnectionsPerSecond float64 // token bucket rate for new connections
	Burst                int     // token bucket depth
	MaxTunnels           int     // concurrent tunnels per integration
	// MaxBrokeredConnections caps, per integration, the tunnels to hosts
	// a secret is bound to (issue 15), at most MaxTunnels of them: egressd
	// terminates TLS on each, two TLS stacks and HTTP/2 windows where a
	// spliced tunnel holds a few KiB, so MaxTunnels alone would let one
	// integration hold gigabytes of a sidecar that serves many.
	MaxBrokeredConnections int
	MaxHandshakes          int // CONNECTs between accept and splice, per integration
	MaxConnections         int // all connections, all integrations; 0 means derived from RLIMIT_NOFILE
	// RequestsPerSecond and RequestBurst bound the requests on brokered
	// connections (issue 15), per integration: each allowed one is an
	// audit line of its own, the record of where a secret went.
	RequestsPerSecond float64
	RequestBurst      int
}

// Timeouts bound every wait. Each has a safe default.
type Timeouts struct {
	RequestHeader time.Duration // reading the CONNECT request (slowloris)
	ClientHello   time.Duration // reading the TLS ClientHello after 200
	Dial          time.Duration // connecting upstream
	DNS           time.Duration // one resolution, all retries included
	Idle          time.Duration // a tunnel with no bytes either way
	Lifetime      time.Duration // a tunnel's whole life; 0 means unlimited
	Drain         time.Duration // graceful shutdown
	StopGrace     time.Duration // egressd run: from the forwarded signal to SIGKILL
	// ManifestRead bounds reading one manifest at start or reload: its
	// path may lead into a file system that never answers, and a read
	// that does not finish in time keeps the integration's last good
	// policy (or none) instead of freezing every reload.
	ManifestRead time.Duration
}

// OperatorDeny narrows every integration: host globs and address ranges.
type OperatorDeny struct {
	Hosts []HostGlob
	CIDRs []netip.Prefix
}

// HostGlob is a compiled operator deny pattern; '*' matches within a label
// only, so "*.corp.example" does not reach "a.b.corp.example".
type HostGlob struct {
	Pattern string
	g       *glob.Pattern
}

// Match reports whether the canonical name matches the pattern.
func (h HostGlob) Match(n allowlist.Name) bool { return h.g != nil && h.g.Match(n.String()) }

// CompileHostGlob compiles an operator deny pattern. The pattern is matched
// against canonical names, so it must be lower-case.
func CompileHostGlob(pattern string) (HostGlob, error) {
	if pattern == "" || pattern != strings.ToLower(pattern) {
		return HostGlob{}, fmt.Errorf("must be a non-empty lower-case glob (%q)", pattern)
	}
	g, err := glob.Compile(pattern, '.')
	if err != nil {
		return HostGlob{}, fmt.Errorf("not a valid glob (%q): %v", pattern, err)
	}
	return HostGlob{Pattern: pattern, g: g}, nil
}

// WidenGate says when a new version that adds entries takes effect.
type WidenGate uint8

const (
	// WidenOnApproval is the zero gate: a widening waits for
	// "egressd approve ID VERSION" or a pinned digest.
	WidenOnApproval WidenGate = iota
	// WidenAuto applies widenings at once. The operator must ask for it.
	WidenAuto
)

// Integration is one integration the operator runs: its manifest, its
// listener, and the named exemptions that widen it.
type Integration struct {
	Manifest     string // manifest file or the folder holding it
	Listen       string // "host:port" or "unix:/path.sock"
	AllowedPeers Peers  // unix listeners only: who may connect
	Exemptions   Exemptions
	Widen        WidenGate
	PinDigest    string // approves the list with this digest
	// Secrets are the credentials bound to hosts (secretbind.go), validated
	// against the manifest on every load.
	Secrets []SecretSpec
	// PassedEnv are the names "egressd run --env" passes: a secret may be
	// bound to one of them as to a declared key.
	PassedEnv []string
	// Folder, when set ("egressd run"), is the integration folder held
	// open (O_PATH): the manifest is read through it, never by its path
	// again (allowlist.LoadIn).
	Folder *os.File
}

// Peers lists the uids and gids allowed on a unix listener (SO_PEERCRED).
// Empty means the listener's file mode alone decides.
type Peers struct {
	UIDs []uint32
	GIDs []uint32
}

// Exemptions are the only settings that widen what a manifest allows. Each
// is named, per integration, warned about at start and stamped on every
// decision it affects.
type Exemptions struct {
	AllowPrivate []netip.Prefix // dev/test: reach these denied ranges
	AllowPorts   []uint16       // ports besides 443
	Mode         Mode           // audit mode
}

// Names lists the exemptions in force, for the start-up warning.
func (e Exemptions) Names() []string {
	var out []string
	for _, p := range e.AllowPrivate {
		out = append(out, "allow_private:"+p.String())
	}
	for _, p := range e.AllowPorts {
		out = append(out, fmt.Sprintf("allow_port:%d", p))
	}
	if e.Mode == Audit {
		out = append(out, "audit_mode")
	}
	return out
}

// DefaultConfig is the configuration with every default filled in and no
// integrations.
func DefaultConfig() Config {
	return Config{
		Audit: AuditConfig{Path: "-", Checkpoints: "stderr"},
		Limits: Limits{
			ConnectionsPerSecond:   100,
			Burst:                  200,
			MaxTunnels:             1024,
			MaxBrokeredConnections: DefaultMaxBrokeredConnections,
			MaxHandshakes:          256,
			RequestsPerSecond:      50,
			RequestBurst:           100,
		},
		Timeouts: Timeouts{
			RequestHeader: 10 * time.Second,
			ClientHello:   10 * time.Second,
			Dial:          10 * time.Second,
			DNS:           5 * time.Second,
			Idle:          5 * time.Minute,
			Drain:         25 * time.Second,
			StopGrace:     10 * time.Second,
			ManifestRead:  DefaultManifestRead,
		},
		Sandbox: sandbox.DefaultLimits,
	}
}

// DefaultMaxBrokeredConnections is limits.max_brokered_connections when
// the config sets none (and max_tunnels is not below it).
const DefaultMaxBrokeredConnections = 32

// DefaultManifestRead is timeouts.manifest_read when the config sets none.
const DefaultManifestRead = 5 * time.Second

// DefaultPort is the only port a manifest allows: https.
const DefaultPort = 443
