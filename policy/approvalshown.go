package policy

import (
	"strings"
)

// targetState is what an approval of an id change or claim at place
// shows about the id it moves to: "unknown id", or the places bound to
// it other than place and the list in force for it. The approval
// records it (IDChange.Shown) and holds only while it is unchanged.
func (s *State) targetState(id, place string) string {
	r, known := s.IDs[id]
	if !known {
		return "unknown id"
	}
	return "bound to [" + strings.Join(boundOtherThan(s, []string{place}, id), ", ") + "]; in force " +
		r.Approved.Version + " " + r.Approved.Digest + "; seen " + r.Version + " " + r.Digest
}

// ApprovalOutdated reports whether the id change or claim approved at
// place was approved against another state of the id it moves to than
// version memory holds now: it then waits for the operator again.
func (s *State) ApprovalOutdated(place string) bool {
	p := s.Folders[place].Pending
	return p != nil && p.Approved && p.Shown != s.targetState(p.ID, place)
}

// withdrawOutdated drops the approval of each of places whose id's state
// changed since it was given (ApprovalOutdated), so the change waits
// again, and reports whether it dropped one.
func withdrawOutdated(s *State, places []string) bool {
	dropped := false
	for _, place := range places {
		if !s.ApprovalOutdated(place) {
			continue
		}
		f := s.Folders[place]
		p := *f.Pending
		p.Approved, p.Shown = false, ""
		f.Pending = &p
		s.Folders[place] = f
		dropped = true
	}
	return dropped
}

// OutdatedNote prefixes the notice of a change whose approval was
// withdrawn (withdrawOutdated).
const OutdatedNote = "the id it moves to changed since the approval (another folder took it, or its list or version moved)"
