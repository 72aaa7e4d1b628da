package policy

import (
	"fmt"
	"strings"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/internal/termsafe"
)

// admission is what the version rules make of a freshly parsed manifest.
type admission struct {
	inForce []allowlist.Entry // the list that applies now
	pending string            // a widening version waiting for the gate, or ""
	idFrom  string            // with pending: the id the folder was approved under
	fromVer string            // with idFrom: the version approved for it
	keptVer string            // with pending and no idFrom: the version whose approved list stays in force
	claimOf []string          // with pending: the folders the claimed id is bound to
	unbound bool              // with pending: the claimed id is bound to no place (unboundClaimWaits)
	// released says a widening or id change came into force through
	// widen: auto, without the operator's approval, or "".
	released string
	// withheld, with pending, says why widen: auto or pin_digest did
	// not approve the widening (gateWithheld).
	withheld string
	// widenAuto says widen: auto is the gate at this load: set for the
	// place and not withheld (gateWithheld), so it is announced as an
	// exemption in force only where it is one.
	widenAuto bool
	// outdated, with pending, says the change's approval was withdrawn
	// at this load: the id it moves to changed since (withdrawOutdated).
	outdated bool
}

// admitAt applies the version rules to m, found at places: its folder
// (see Places). A folder is bound to the first id loaded there; a manifest
// that claims another id there is not a fresh start: until the operator
// approves the change, the list approved for the folder's old id stays in
// force for that folder, and the new id is pending.
// Conversely an id is bound to its folders (idfolder.go): a claim of it
// from another folder is pending too, with nothing in force. Nothing
// pending changes the id's record.
//
// stateDir names version memory's folder in the commands a refusal prints
// ("" for memory that lives in the process).
func admitAt(s *State, places []string, m *allowlist.Manifest, in Integration, stateDir string) (admission, error) {
	outdated := withdrawOutdated(s, places)
	var changed []string
	for _, place := range places {
		if f := s.Folders[place]; f.ID != "" && f.ID != m.ID && !idChangePasses(f, m, in) {
			changed = append(changed, place)
		}
	}
	claimOf := claimWaits(s, places, m, in)
	unbound := claimOf == nil && unboundClaimWaits(s, places, m, in)
	// A change or claim to an id version memory knows is held only where a
	// load could apply it once approved: below the id's version (or at it
	// with another list) every load refuses it, so the approval would bind
	// nothing and say it had.
	if r, known := s.IDs[m.ID]; known && (len(changed) > 0 || claimOf != nil || unbound) {
		if err := versionFloor(r, m.ID, m.Version, m.Digest(), stateDir); err != nil {
			return admission{}, fmt.Errorf("the manifest takes the id %s, which version memory knows from another folder or id: %w", m.ID, err)
		}
	}
	if len(changed) > 0 {
		p := changeTo(m)
		for _, place := range changed {
			f := s.Folders[place]
			f.holdChange(p)
			s.Folders[place] = f
		}
		from := s.Folders[changed[0]].ID
		kept, err := parseApproved(s.IDs[from].Approved.Entries)
		return admission{inForce: kept, pending: m.Version, idFrom: from, fromVer: s.IDs[from].Approved.Version, claimOf: claimOf, unbound: unbound, outdated: outdated}, err
	}
	if claimOf != nil || unbound {
		holdClaim(s, places[0], m)
		return admission{inForce: []allowlist.Entry{}, pending: m.Version, claimOf: claimOf, unbound: unbound, outdated: outdated}, nil
	}
	withheld := gateWithheld(s, places, m, in)
	if withheld != "" {
		in.PinDigest, in.Widen = "", WidenOnApproval
	}
	for _, place := range places {
		if f, bound := s.Folders[place]; !bound || f.ID != m.ID || f.Pending != nil {
			s.Folders[place] = Folder{ID: m.ID, ByApproval: (f.ID == m.ID && f.ByApproval) || idChangePasses(f, m, in)}
		}
	}
	r, known := s.IDs[m.ID]
	adm, err := admit(&r, known, m, in, stateDir)
	if err == nil {
		s.IDs[m.ID] = r
	}
	if adm.pending != "" {
		adm.withheld = withheld
	}
	adm.widenAuto = in.Widen == WidenAuto
	return adm, err
}

// gateWithheld says why pin_digest or widen: auto, set for places, must
// not approve a widening of m.ID there, or "" when they may. They are the
// operator's word for the id the entry's place holds on its own: never
// for an id another folder (or a listener) is bound to too, whose list
// the widening would rewrite and whose version floor it would raise, and
// never for an id the place took by an approved id change or claim (at
// this load, or an earlier one), whose approval was shown with the id's
// widening still waiting. Such a widening waits for "egressd approve"
// like any other.
func gateWithheld(s *State, places []string, m *allowlist.Manifest, in Integration) string {
	gate := "widen: auto"
	switch {
	case in.Widen == WidenAuto:
	case in.PinDigest != "":
		gate = "pin_digest"
	default:
		return ""
	}
	var why []string
	if others := boundOtherThan(s, places, m.ID); len(others) > 0 {
		why = append(why, fmt.Sprintf("version memory binds %s to %s too, whose list and version floor the widening would change", m.ID, strings.Join(others, ", ")))
	}
	if _, known := s.IDs[m.ID]; known && !heldOnItsOwnRight(s, places, m.ID) {
		why = append(why, fmt.Sprintf("%s took %s by an approved id change or claim, which left the id's widening waiting", places[0], m.ID))
	}
	if len(why) == 0 {
		return ""
	}
	return gate + " does not apply: " + strings.Join(why, ", and ") + "; approve the widening with egressd approve"
}

// boundOtherThan names the places other than places that s binds id to:
// "folder DIR", or a listener's key.
func boundOtherThan(s *State, places []string, id string) []string {
	mine := map[string]bool{}
	for _, place := range places {
		mine[place] = true
	}
	var out []string
	for _, place := range sortedKeys(s.Folders) {
		if mine[place] || s.Folders[place].ID != id {
			continue
		}
		if isFolder(place) {
			place = "folder " + place
		}
		out = append(out, place)
	}
	return out
}

// heldOnItsOwnRight reports whether a place of places was bound to id by
// loading it, not by an approved id change or claim.
func heldOnItsOwnRight(s *State, places []string, id string) bool {
	for _, place := range places {
		if f := s.Folders[place]; f.ID == id && !f.ByApproval {
			return true
		}
	}
	return false
}

// idChangePasses reports whether the operator approved, with "egressd
// approve", m as the id change or claim pending at folder f. Nothing else
// passes it: a pinned digest covers the list only, not the id, and
// widen: auto covers widenings of the entry's own id; either would let an
// integration rename itself to another's id and rewrite its record.
func idChangePasses(f Folder, m *allowlist.Manifest, _ Integration) bool {
	p := f.Pending
	return p != nil && p.Approved && p.ID == m.ID && p.Version == m.Version && p.Digest == m.Digest()
}

// boundTo reports whether s binds id to one of places.
func boundTo(s *State, places []string, id string) bool {
	for _, place := range places {
		if s.Folders[place].ID == id {
			return true
		}
	}
	return false
}

// admit applies the version rules to m against its record, updating the
// record. The specs say a list changes only with a new version, versions
// only go up, and a new list passes a gate; so:
//   - the first list seen for an id is installed and applies;
//   - a lower version, or the same version with another list, is refused;
//   - a higher version that only narrows applies at once;
//   - a higher version that adds entries applies once the operator's gate
//     passes (widen: auto, a pinned digest, or "egressd approve"); until then
//     the last approved list stays in force and the version is pending.
func admit(r *Record, known bool, m *allowlist.Manifest, in Integration, stateDir string) (admission, error) {
	digest := m.Digest()
	if !known {
		*r = Record{Version: m.Version, Digest: digest, Approved: approvedOf(m, digest)}
		return admission{inForce: m.Entries}, nil
	}
	if err := versionFloor(*r, m.ID, m.Version, digest, stateDir); err != nil {
		return admission{}, err
	}
	if allowlist.CompareVersions(m.Version, r.Version) > 0 {
		r.Version, r.Digest = m.Version, digest
	}
	approved, err := parseApproved(r.Approved.Entries)
	if err != nil {
		return admission{}, err
	}
	if !widens(m.Entries, approved) || gatePasses(r, m, digest, in) {
		adm := admission{inForce: m.Entries}
		if widens(m.Entries, approved) && in.Widen == WidenAuto {
			adm.released = releasedNotice(m, approved, "widen: auto")
		}
		r.Approved, r.Pending = approvedOf(m, digest), nil
		return adm, nil
	}
	r.Pending = approvedOf(m, digest).Entries
	return admission{inForce: approved, pending: m.Version, keptVer: r.Approved.Version}, nil
}

// versionFloor refuses m below its id's record r: a lower version than
// one seen, or the version seen with another list.
func versionFloor(r Record, id, version, digest, stateDir string) error {
	switch c := allowlist.CompareVersions(version, r.Version); {
	case c < 0:
		return fmt.Errorf("version %s is lower than %s, seen before; versions only go up: give a version above %s, or, if %s %s must come back, forget the id deliberately (%s)", version, r.Version, r.Version, id, version, WithState("egressd state forget "+termsafe.ShellWord(id), stateDir))
	case c == 0 && digest != r.Digest:
		return fmt.Errorf("network list changed but version %s did not; a new list needs a version above %s", version, r.Version)
	}
	return nil
}

func gatePasses(r *Record, m *allowlist.Manifest, digest string, in Integration) bool {
	if in.Widen == WidenAuto || (in.PinDigest != "" && in.PinDigest == digest) {
		return true
	}
	d, ok := r.Approvals[m.Version]
	return ok && d == digest
}

// widens reports whether next has an entry that approved lacks.
func widens(next, approved []allowlist.Entry) bool {
	have := make(map[allowlist.Entry]bool, len(approved))
	for _, e := range approved {
		have[e] = true
	}
	for _, e := range next {
		if !have[e] {
			return true
		}
	}
	return false
}

func approvedOf(m *allowlist.Manifest, digest string) Approved {
	a := Approved{Version: m.Version, Digest: digest, Entries: []string{}}
	for _, e := range m.Entries {
		a.Entries = append(a.Entries, e.String())
	}
	return a
}

// parseApproved reads back the entries version memory stored. They were
// canonical when written; one that no longer parses means the state file
// was edited, and nothing from it is trusted.
func parseApproved(ss []string) ([]allowlist.Entry, error) {
	out := make([]allowlist.Entry, 0, len(ss))
	for _, s := range ss {
		e, warn, err := allowlist.ParseEntry(s)
		if err != nil || len(warn) > 0 {
			return nil, fmt.Errorf("version memory holds an entry that is not canonical (%q); the state file was edited", s)
		}
		out = append(out, e)
	}
	return out, nil
}
