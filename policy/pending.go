package policy

import (
	"fmt"
	"strings"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/internal/termsafe"
	"github.com/egressd/egressd/internal/workdir"
)

// setPending records that version (the manifest's own) waits for the
// operator, and, when the wait is for an id change, the folder's old id,
// and, when the id is bound to other folders, those folders. The registry
// calls it once, before the policy is published.
func (p *Policy) setPending(version, idFrom string, claimOf []string, unbound bool) {
	p.Pending, p.PendingIDFrom, p.PendingClaimOf, p.PendingUnbound = version, idFrom, claimOf, unbound
	if version != "" {
		p.pendingMatcher = allowlist.Compile(p.Manifest.Entries)
	}
}

// InForce names the integration whose approved list p enforces: the
// manifest's id and version, except while an id change waits, when it is
// the folder's old id and the version approved for it. Audit events carry
// it, so nothing is filed under an id the operator has not approved.
func (p *Policy) InForce() (id, version string) {
	switch {
	case p.Pending != "" && p.PendingIDFrom != "":
		return p.PendingIDFrom, p.PendingIDFromVersion
	case p.Pending != "" && len(p.PendingClaimOf) == 0 && !p.PendingUnbound && p.PendingKeptVersion != "":
		// A widening waits: the version approved last decides (round 39:
		// events named the unapproved version as the one in force).
		return p.Manifest.ID, p.PendingKeptVersion
	}
	return p.Manifest.ID, p.Manifest.Version
}

// InForceEntries are the entries of the list p enforces, as written in
// canonical form; nil for a nil p. The policy audit event records them.
func (p *Policy) InForceEntries() []string {
	if p == nil {
		return nil
	}
	out := []string{}
	for _, e := range p.Entries() {
		out = append(out, e.String())
	}
	return out
}

// Claim is the folder of p's manifest while it claims another folder's
// id and the claim waits for the operator (PendingClaimOf), "" otherwise,
// and "" while the folder's id change waits: its events are then the old
// id's, which it holds (InForce). Until approved the folder is not that
// integration: what it does is logged under the id it claims, marked as
// the claim's, so no report counts it as the owner's.
func (p *Policy) Claim() string {
	if p == nil || p.Pending == "" || len(p.PendingClaimOf) == 0 || p.PendingIDFrom != "" {
		return ""
	}
	return ManifestPlace(p.ManifestAt)
}

// Identify is ev written for p's integration: the id and version in force
// (InForce) and, for an unapproved claim, the claiming folder (Claim).
// Every event written for an integration takes its identity here, so none
// of a claim's is filed as the owner's. A nil p leaves ev as it is.
func (p *Policy) Identify(ev audit.Event) audit.Event {
	if p == nil {
		return ev
	}
	ev.Integration, ev.IntegrationVersion = p.InForce()
	ev.Claim = p.Claim()
	return ev
}

// PendingChange is "ID VERSION" of the id change that waits for the
// operator, or "" when none does.
func (p *Policy) PendingChange() string {
	if p == nil || p.Pending == "" || p.PendingIDFrom == "" {
		return ""
	}
	return p.Manifest.ID + " " + p.Pending
}

// pendingMatch reports the entry of the pending version's list that
// matches host: a host that waits for approval, not one the manifest lacks.
func (p *Policy) pendingMatch(host allowlist.Name) (allowlist.Entry, bool) {
	if p.pendingMatcher == nil {
		return allowlist.Entry{}, false
	}
	return p.pendingMatcher.Match(host)
}

// ApproveCommand is the command the operator runs for what is pending, or
// "". An id change or a claim waits at the manifest's place, and only a
// command naming that place and the list's digest approves it (see
// Memory.ApprovePending): that command, ready to paste, binding the list
// this load saw. A widening's command names the digest of the list this
// load saw too: "egressd approve ID VERSION" alone approves nothing (it
// shows the lists waiting), so printed without it, it did not work as
// printed.
func (p *Policy) ApproveCommand() string {
	if p == nil || p.Pending == "" {
		return ""
	}
	if p.PendingIDFrom != "" || len(p.PendingClaimOf) > 0 {
		return WithState(ApproveCommandFor(ManifestPlace(p.ManifestAt), p.Manifest.Digest(), p.Manifest.ID, p.Pending), p.StateDir)
	}
	return WithState(ApproveCommandFor("", p.Manifest.Digest(), p.Manifest.ID, p.Pending), p.StateDir)
}

// WithState puts --state DIR in an "egressd approve" or "egressd state"
// command when dir is known: the default folder differs between root and
// other users, and a load may have been given another.
func WithState(cmd, dir string) string {
	if dir == "" {
		return cmd
	}
	if abs, err := workdir.Abs(dir); err == nil {
		dir = abs
	}
	for _, sub := range []string{"egressd approve ", "egressd state "} {
		if strings.HasPrefix(cmd, sub) {
			return sub + "--state " + termsafe.ShellWord(dir) + " " + cmd[len(sub):]
		}
	}
	return cmd
}

// approveManifestCommand approves the manifest at the place this load
// read, as printed for a claim of an id no folder holds.
func (p *Policy) approveManifestCommand() string {
	return WithState("egressd approve --manifest "+termsafe.ShellWord(ManifestPlace(p.ManifestAt)), p.StateDir)
}

// dropClaimAndForgetCommand drops the claim this load holds, then forgets
// the id in this load's version memory. Forgetting the id alone is refused
// while the claim waits (Memory.Forget: it would hand the id to whichever
// folder loads first), so the notice that offers a fresh start prints both,
// joined so that the second runs only if the first did.
func (p *Policy) dropClaimAndForgetCommand() string {
	drop := WithState("egressd state forget --folder "+termsafe.ShellWord(ManifestPlace(p.ManifestAt)), p.StateDir)
	return drop + " && " + WithState("egressd state forget "+termsafe.ShellWord(p.Manifest.ID), p.StateDir)
}

// PendingNotice says what waits for the operator and how to approve it,
// or "" when nothing does. Serve and run state it when they load. A
// change whose approval was withdrawn says so first.
func (p *Policy) PendingNotice() string {
	n := p.pendingNotice()
	if n != "" && p.PendingOutdated {
		n = ManifestPlace(p.ManifestAt) + ": " + OutdatedNote + "; approve again: " + p.ApproveCommand() + "; " + n
	}
	return n
}

func (p *Policy) pendingNotice() string {
	if p == nil || p.Pending == "" {
		return ""
	}
	if p.PendingIDFrom != "" {
		also := ""
		if len(p.PendingClaimOf) > 0 {
			also = fmt.Sprintf(" (version memory binds %s to %s)", p.Manifest.ID, folderList(p.PendingClaimOf))
		}
		return fmt.Sprintf("%s changed its id from %s to %s %s (list digest %s)%s; the new id waits for the operator's approval (%s), and the list approved for %s stays in force until then",
			p.ManifestAt, p.PendingIDFrom, p.Manifest.ID, p.Pending, p.Manifest.Digest(), also, p.ApproveCommand(), p.PendingIDFrom)
	}
	if len(p.PendingClaimOf) > 0 {
		return claimNotice(p)
	}
	if p.PendingUnbound {
		return unboundClaimNotice(p)
	}
	var added []string
	for _, e := range p.Manifest.Entries {
		if !p.hasEntry(e) {
			added = append(added, e.String())
		}
	}
	why := ""
	if p.GateWithheld != "" {
		why = " (" + p.GateWithheld + ")"
	}
	return fmt.Sprintf("%s %s adds %s to its network list (list digest %s); it waits for the operator's approval (%s), and the last approved list stays in force until then%s",
		p.Manifest.ID, p.Pending, strings.Join(added, " "), p.Manifest.Digest(), p.ApproveCommand(), why)
}

func (p *Policy) hasEntry(e allowlist.Entry) bool {
	for _, have := range p.Entries() {
		if have == e {
			return true
		}
	}
	return false
}
