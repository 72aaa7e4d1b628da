// Package selftest is the escape battery behind "egressd selftest": probes
// that a hostile program would run inside "egressd run", each doing the real
// thing (opening the socket, sending the query, calling the syscall) and
// judged by what happened, never by reading a configuration.
//
// The battery runs in two halves. The outer half (Beacons) runs in egressd
// on the host: it plants things a sandboxed program must not reach (a
// loopback listener, unix sockets, a canary variable, a leaked descriptor,
// an upstream DNS server that records every name it is asked) and, once the
// inner half has run, adds what it observed. The inner half (ProbeMain) is
// the egressd binary re-run as the sandboxed program; it runs every probe
// and writes the results to its standard output, which the outer half
// captures.
//
// A probe that cannot run on this host says skipped with the reason; it
// never counts as closed.
package selftest

// Verdicts. Only Closed means a layer stopped the attack.
const (
	Closed  = "closed"
	Open    = "OPEN"
	Skipped = "skipped"
)

// Layers: what is meant to stop each probe.
const (
	LayerNetNS    = "network namespace"
	LayerCapture  = "capture"
	LayerDNS      = "sandbox DNS"
	LayerFS       = "filesystem"
	LayerLandlock = "Landlock"
	LayerSeccomp  = "seccomp"
	LayerCaps     = "capabilities"
	LayerEnv      = "environment"
	LayerFD       = "fd hygiene"
	LayerPID      = "pid namespace"
	LayerUTS      = "UTS namespace"
	LayerCgroupNS = "cgroup namespace"
	LayerTTY      = "terminal" // the program must not hold the user's terminal
	LayerAudit    = "audit log"
	LayerLimits   = "resource limits"
)

// Result is one probe's outcome.
type Result struct {
	Name   string `json:"name"`
	Layer  string `json:"layer"`
	Result string `json:"result"`
	Detail string `json:"detail"`
	// Reached are the destinations a network probe connected or sent to.
	// The outer half calls the probe closed only if egressd's audit log
	// shows each of them refused: a capture that accepts and refuses is
	// not a way out.
	Reached []string `json:"reached,omitempty"`
}

// Report is what "egressd selftest --json" prints.
type Report struct {
	Probes []Result `json:"probes"`
	Host   Host     `json:"host"`
	Bounds Bounds   `json:"bounds"`
}

// AnyOpen reports whether some probe found a hole.
func (r Report) AnyOpen() bool {
	for _, p := range r.Probes {
		if p.Result == Open {
			return true
		}
	}
	return false
}

// Targets are the destinations the network probes try. The defaults name
// real public services; tests pass documentation addresses only.
type Targets struct {
	TCP443      []string `json:"tcp443"`      // IP literal:443
	TCPOther    []string `json:"tcp_other"`   // IP literal, another port
	IPv6        []string `json:"ipv6"`        // [v6]:port
	UDP         []string `json:"udp"`         // ip:port, a bare datagram
	PublicDNS   []string `json:"public_dns"`  // ip:53 of public resolvers
	Metadata    []string `json:"metadata"`    // the cloud metadata address
	DoHNames    []string `json:"doh_names"`   // DNS-over-HTTPS host names
	DeniedNames []string `json:"denied_name"` // a name no manifest allows
}

// DefaultTargets are what the shipped binary tries. Inside a working
// sandbox none of it leaves the machine.
func DefaultTargets() Targets {
	return Targets{
		TCP443:      []string{"8.8.8.8:443", "1.1.1.1:443"},
		TCPOther:    []string{"8.8.8.8:853", "1.1.1.1:80"},
		IPv6:        []string{"[2001:4860:4860::8888]:443", "[2606:4700:4700::1111]:853"},
		UDP:         []string{"1.1.1.1:443", "8.8.8.8:123"},
		PublicDNS:   []string{"8.8.8.8:53", "1.1.1.1:53", "9.9.9.9:53"},
		Metadata:    []string{"169.254.169.254:80"},
		DoHNames:    []string{"dns.google", "cloudflare-dns.com"},
		DeniedNames: []string{"denied.egressd-selftest.example"},
	}
}

// Config is everything the inner half needs, sent as one JSON argument.
type Config struct {
	Nonce      string   `json:"nonce"` // unique to this run; beacons answer with it
	Targets    Targets  `json:"targets"`
	HostDNS    []string `json:"host_dns"`    // the host's resolvers, ip:53, from its resolv.conf
	Loopback   string   `json:"loopback"`    // the outer's loopback beacon, 127.0.0.1:port
	UnixPath   string   `json:"unix_path"`   // the outer's unix socket beacon, by path
	UnixAbs    string   `json:"unix_abs"`    // the outer's abstract unix socket beacon, without '@'
	LeakedFDs  []int    `json:"leaked_fds"`  // descriptor numbers the outer leaked on purpose
	CanaryEnv  string   `json:"canary_env"`  // a launcher variable no manifest declares
	HostHome   string   `json:"host_home"`   // the host user's home folder
	HostName   string   `json:"host_name"`   // the host's hostname
	Integr     string   `json:"integration"` // the integration folder (host path)
	Manifest   string   `json:"manifest"`    // the manifest file (host path)
	AuditLog   string   `json:"audit_log"`   // egressd's audit log (host path)
	OtherState string   `json:"other_state"` // a file in another integration's state (host path)
	HostMarker string   `json:"host_marker"` // a host file (full path) that proves a walk reached the host
	// Resolver, when set, replaces the program's own resolver
	// configuration for the DNS probes. Only tests set it (through
	// TestTargets), so that nothing asks the host's real resolver.
	Resolver string `json:"resolver,omitempty"`
	// TerminalLent says standard input is a pseudo-terminal the outer half
	// lent: only then does the terminal probe touch it, so a user's own
	// terminal is never attacked.
	TerminalLent bool `json:"terminal_lent,omitempty"`
	// Sandboxed says egressd started a sandbox (not --insecure-env-only):
	// only then may a pid 1 hidden from the program be signalled as
	// egressd's init.
	Sandboxed bool `json:"sandboxed,omitempty"`
}
