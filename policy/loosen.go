package policy

import (
	"fmt"
	"strings"

	"github.com/egressd/egressd/allowlist"
)

// Loosenings names what the operator's config lets this integration do
// beyond its approved list and the default denials: its exemptions, and
// widen: auto, which admits every widening without the operator's
// approval. A daemon announces each when it comes into force and when it
// goes, so a reload loosens nothing silently.
func (p *Policy) Loosenings() []string {
	out := p.Exemptions.Names()
	if p.widenAuto {
		out = append(out, "widen:auto")
	}
	return out
}

// DenyWithdrawn lists the operator denials in old that next no longer
// holds, as "deny.hosts no longer denies HOST" sentences: a reload that
// shrinks the deny list lets those targets through, and says so.
func DenyWithdrawn(old, next OperatorDeny) []string {
	var out []string
	hosts := map[string]bool{}
	for _, h := range next.Hosts {
		hosts[h.Pattern] = true
	}
	for _, h := range old.Hosts {
		if !hosts[h.Pattern] {
			out = append(out, "deny.hosts no longer denies "+h.Pattern)
		}
	}
	cidrs := map[string]bool{}
	for _, c := range next.CIDRs {
		cidrs[c.String()] = true
	}
	for _, c := range old.CIDRs {
		if !cidrs[c.String()] {
			out = append(out, "deny.cidrs no longer denies "+c.String())
		}
	}
	return out
}

// releasedNotice says that gate let a widening of m in without the
// operator's approval (widen: auto), naming what it adds to approved.
func releasedNotice(m *allowlist.Manifest, approved []allowlist.Entry, gate string) string {
	have := map[allowlist.Entry]bool{}
	for _, e := range approved {
		have[e] = true
	}
	var added []string
	for _, e := range m.Entries {
		if !have[e] {
			added = append(added, e.String())
		}
	}
	return fmt.Sprintf("%s %s adds %s to its network list; %s let it in without the operator's approval", m.ID, m.Version, strings.Join(added, " "), gate)
}
