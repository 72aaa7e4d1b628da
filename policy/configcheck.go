package policy

import (
	"fmt"
	"net/netip"
)

// metadataAddrs are the cloud metadata and host-agent addresses an
// allow_private range must not reach by accident: AWS, GCP, Azure and
// OpenStack at 169.254.169.254, AWS's IPv6 endpoint, Azure's WireServer.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("168.63.129.16"),
}

// CheckConfig finds, without serving, what serve would refuse at start in a
// loaded config and what deserves a warning (an allow_private range wider
// than a dev exemption). What the registry refuses (a manifest that does not
// load, two integrations with one id or one manifest file) comes from the
// registry serve starts from, so check and serve cannot disagree; two
// integrations on one listener are a config error LoadConfig reports to
// both (sharedListeners). Each line names the integration by its manifest path. host
// are this machine's own addresses (nil: unknown), which an allow_private
// range must not cover unnoticed: the exemption lifts the host-itself
// check too, so the integration reaches services on the proxy host.
func CheckConfig(cfg Config, host []netip.Addr) (errs, warns []string) {
	for _, err := range StartProblems(cfg) {
		errs = append(errs, err.Error())
	}
	for _, in := range cfg.Integrations {
		at := in.Manifest
		for _, p := range in.Exemptions.AllowPrivate {
			if msg := allowPrivateWarning(p); msg != "" {
				warns = append(warns, at+": "+msg)
			}
			for _, a := range host {
				// Loopback is the host by name: a range that lists it says so.
				if !a.Unmap().IsLoopback() && p.Contains(a.Unmap()) {
					warns = append(warns, fmt.Sprintf("%s: allow_private %s covers this host's own address %s: the integration can reach services on the proxy host itself; narrow the range to exclude it", at, p, a.Unmap()))
				}
			}
		}
	}
	warns = append(warns, GuessableWarnings(cfg)...)
	if msg := SharedCapWarning(cfg, cfg.Limits.MaxConnections); cfg.Limits.MaxConnections > 0 && msg != "" {
		warns = append(warns, "limits: "+msg)
	}
	return errs, warns
}

// SharedCapWarning says when the integrations' own bounds add up to more
// than the global cap of maxConns connections: one integration's flood
// could then reach the cap and refuse another's connections. Each
// connection counts once, whatever descriptors its tunnel holds: egressd
// derives the cap from RLIMIT_NOFILE after setting aside its splice pipes
// and a reserve. "" when they fit.
func SharedCapWarning(cfg Config, maxConns int) string {
	per := int64(cfg.Limits.MaxHandshakes + cfg.Limits.MaxTunnels)
	if maxConns <= 0 || per*int64(len(cfg.Integrations)) <= int64(maxConns) {
		return ""
	}
	return fmt.Sprintf("%d integrations × (limits.max_handshakes %d + limits.max_tunnels %d) exceed the global cap of %d connections: one integration's flood can refuse another's connections; lower the per-integration limits", len(cfg.Integrations), cfg.Limits.MaxHandshakes, cfg.Limits.MaxTunnels, maxConns)
}

// allowPrivateWarning says why an allow_private range is more than a
// dev/test exemption: it reaches a metadata address, or it is not inside
// one denied range (so it spans several, or public space, where it means
// nothing but a mistake).
func allowPrivateWarning(p netip.Prefix) string {
	table := deniedV6
	if p.Addr().Is4() {
		table = deniedV4
	}
	inside := false
	for _, d := range table {
		inside = inside || (d.Bits() <= p.Bits() && d.Contains(p.Addr()))
	}
	if !inside {
		return fmt.Sprintf("allow_private %s is wider than a dev exemption: it is not inside one denied range, and lifts every denied range it covers, cloud metadata included; list the one range you test against", p)
	}
	for _, a := range metadataAddrs {
		if p.Contains(a) {
			return fmt.Sprintf("allow_private %s reaches the cloud metadata address %s; narrow it to the addresses you test against", p, a)
		}
	}
	return ""
}
