package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/egressd/egressd/allowlist"
)

// Decision is the whole answer for one CONNECT target or one address. It is
// made once and never edited: facts learned later go into the audit event.
// The zero Decision denies.
type Decision struct {
	Verdict   Verdict
	Reason    Reason
	Rule      string         // the manifest entry or operator rule that decided; "" if none
	Host      allowlist.Name // canonical; zero when the target did not parse
	Port      uint16
	Exemption string // the named exemption this decision relied on, if any
}

// Policy is one integration's compiled policy for one generation: the
// manifest allowlist intersected with the operator's limits, widened only by
// named exemptions. It is immutable and safe for concurrent use.
type Policy struct {
	Name        string // the integration's config name (its manifest id)
	Manifest    *allowlist.Manifest
	ManifestAt  string // the manifest file read
	Generation  uint64
	Exemptions  Exemptions
	Pending     string // a newer version waiting for approval, "" if none
	matcher     *allowlist.Matcher
	deny        OperatorDeny
	nat64       []netip.Prefix
	host        *HostAddrs
	allowedPort map[uint16]bool

	// PendingIDFrom is, with Pending, the id this manifest's folder was
	// approved under when the pending version changed the id.
	PendingIDFrom string
	// PendingIDFromVersion is, with PendingIDFrom, the version approved
	// for that id: with it, the integration in force (InForce).
	PendingIDFromVersion string
	// PendingKeptVersion is, with Pending and no PendingIDFrom, the
	// version whose approved list stays in force while the id's widening
	// waits: a folder whose claim was approved runs under the id's list,
	// which may be another folder's older version, and what it allows is
	// named as that version's (Sentence).
	PendingKeptVersion string
	// GateWithheld is, with Pending and no PendingIDFrom, why widen: auto
	// or pin_digest did not approve the widening (gateWithheld), or "".
	GateWithheld string
	// PendingClaimOf is, with Pending, the folders version memory binds
	// the manifest's id to, when this manifest claims it from another
	// folder (idfolder.go).
	PendingClaimOf []string
	// PendingUnbound is, with Pending, set when this manifest claims an id
	// version memory knows but binds to no folder (an earlier egressd's
	// memory): only the operator's approval binds this folder to it.
	PendingUnbound bool
	// PendingOutdated is, with Pending, set when the id change or claim
	// waits again because its approval was given against another state
	// of the id it moves to (withdrawOutdated).
	PendingOutdated bool
	// StateDir is the version memory folder the policy was admitted
	// against ("" for memory kept in the process): an approve command
	// printed for it names that folder, so it works as printed whatever
	// --state the load was given and whoever runs it.
	StateDir       string
	pendingMatcher *allowlist.Matcher // the pending version's list
	widenAuto      bool               // the config admits widenings without approval
	secrets        []Secret
}

// PolicyOptions are the inputs of NewPolicy beyond the manifest.
type PolicyOptions struct {
	Exemptions Exemptions
	WidenAuto  bool // widen: auto, announced with the exemptions
	Deny       OperatorDeny
	NAT64      []netip.Prefix // added to DefaultNAT64
	// Host holds the proxy host's own interface addresses, denied like
	// loopback; nil means none are known to be special.
	Host *HostAddrs
	// Secrets are the credentials bound to hosts (secret.go); validated by
	// the caller against the manifest before NewPolicy.
	Secrets []Secret
}

// NewPolicy compiles a policy for m with the given entries in force (the
// last approved list, which may differ from m.Entries while a widening waits).
func NewPolicy(m *allowlist.Manifest, entries []allowlist.Entry, opts PolicyOptions) *Policy {
	p := &Policy{
		Name:        m.ID,
		Manifest:    m,
		Exemptions:  opts.Exemptions,
		matcher:     allowlist.Compile(entries),
		deny:        opts.Deny,
		nat64:       append(append([]netip.Prefix(nil), DefaultNAT64...), opts.NAT64...),
		host:        opts.Host,
		allowedPort: map[uint16]bool{DefaultPort: true},
		widenAuto:   opts.WidenAuto,
		secrets:     opts.Secrets,
	}
	for _, port := range opts.Exemptions.AllowPorts {
		p.allowedPort[port] = true
	}
	return p
}

// Entries returns the entries in force.
func (p *Policy) Entries() []allowlist.Entry { return p.matcher.Entries() }

// Decide judges a CONNECT target: the host exactly as the client sent it
// and the port. It does not resolve anything, so a denied name is never
// looked up. Order: the host must parse (an IP in any spelling is
// ip_literal), the port must be allowed, no operator glob may match, and
// the manifest must list the host.
func (p *Policy) Decide(rawHost string, port uint16) Decision {
	d := Decision{Port: port}
	host, err := allowlist.ParseWireHost(rawHost, allowlist.HostForm)
	if err != nil {
		d.Reason = BadRequest
		if errors.Is(err, allowlist.ErrIPLiteral) {
			d.Reason = IPLiteral
		}
		return d
	}
	d.Host = host
	if !p.allowedPort[port] {
		d.Reason = PortNotAllowed
		return d
	}
	if port != DefaultPort {
		d.Exemption = fmt.Sprintf("allow_port:%d", port)
	}
	for _, g := range p.deny.Hosts {
		if g.Match(host) {
			d.Reason, d.Rule = OperatorDenied, "deny.hosts: "+g.Pattern
			return d
		}
	}
	if e, ok := p.matcher.Match(host); ok {
		d.Verdict, d.Reason, d.Rule = Allow, Allowed, e.String()
		return d
	}
	d.Reason = NotAllowlisted
	if e, ok := p.pendingMatch(host); ok {
		d.Reason, d.Rule = PendingApproval, e.String()
	}
	if p.Exemptions.Mode == Audit {
		d.Verdict = WouldDeny
		d.Exemption = strings.TrimPrefix(d.Exemption+",audit_mode", ",")
	}
	return d
}

// CheckAddr judges one resolved address. It runs on every connection for
// every answer, cached or not. A denied range is private_address unless an
// allow_private exemption covers it; an operator CIDR is operator_denied and
// no exemption lifts it.
func (p *Policy) CheckAddr(a netip.Addr) Decision {
	a = a.WithZone("")
	judged := a
	if v4, ok := embeddedV4(a, p.nat64); ok {
		judged = v4
	}
	for _, c := range p.deny.CIDRs {
		if c.Contains(a) || c.Contains(judged) {
			return Decision{Reason: OperatorDenied, Rule: "deny.cidrs: " + c.String()}
		}
	}
	local, unknown := p.host.holds(a, judged)
	if unknown != nil && !isDenied(a, p.nat64) {
		return Decision{Reason: PrivateAddress, Rule: "host addresses unknown (" + unknown.Error() + "): an address that may be this host's own is not connected to"}
	}
	if !isDenied(a, p.nat64) && !local {
		return Decision{Verdict: Allow, Reason: Allowed}
	}
	for _, c := range p.Exemptions.AllowPrivate {
		if c.Contains(a) || c.Contains(judged) {
			return Decision{Verdict: Allow, Reason: Allowed, Exemption: "allow_private:" + c.String()}
		}
	}
	return Decision{Reason: PrivateAddress}
}
