package audit

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/egressd/egressd/internal/termsafe"
)

// Unattributed counts records that name no integration, by event,
// manifest (all that names a listener whose manifest never loaded),
// decision, reason and target. egressd's own life (lifecycle and
// checkpoint lines) names none by design; any other record without one
// (a config refused, an attempt egressd could not tie to an integration)
// is a finding the report shows rather than drops.
type Unattributed struct {
	Event    string    `json:"event"`
	Manifest string    `json:"manifest,omitempty"`
	Decision string    `json:"decision,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Target   string    `json:"target,omitempty"`
	Count    int64     `json:"count"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
}

// unattributed gathers the records of recs that name no integration and
// are not egressd's own lifecycle or checkpoints, grouped and sorted.
func unattributed(recs []Record) []Unattributed {
	groups := map[[5]string]*Unattributed{}
	for _, r := range recs {
		if r.Integration != "" || r.Event == string(Lifecycle) || r.Event == string(Checkpoint) {
			continue
		}
		k := [5]string{r.Event, r.Manifest, r.Decision, r.Reason, r.target()}
		u := groups[k]
		if u == nil {
			u = &Unattributed{Event: r.Event, Manifest: r.Manifest, Decision: r.Decision, Reason: r.Reason, Target: r.target(), First: r.Time}
			groups[k] = u
		}
		u.Count += r.count()
		if r.Time.Before(u.First) {
			u.First = r.Time
		}
		if r.Time.After(u.Last) {
			u.Last = r.Time
		}
	}
	out := make([]Unattributed, 0, len(groups))
	for _, u := range groups {
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Event != b.Event {
			return a.Event < b.Event
		}
		if a.Manifest != b.Manifest {
			return a.Manifest < b.Manifest
		}
		if a.Reason != b.Reason {
			return a.Reason < b.Reason
		}
		return a.Target < b.Target
	})
	return out
}

// writeUnattributed renders the unattributed records, if any.
func writeUnattributed(w io.Writer, us []Unattributed) {
	if len(us) == 0 {
		return
	}
	q := termsafe.String
	fmt.Fprintln(w, "== unattributed (records that name no integration):\tevent\tmanifest\tdecision\treason\ttarget\tcount\tfirst\tlast")
	for _, u := range us {
		fmt.Fprintf(w, "\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", q(u.Event), q(u.Manifest), q(u.Decision), q(u.Reason), q(u.Target), u.Count, u.First.Format(time.RFC3339), u.Last.Format(time.RFC3339))
	}
	fmt.Fprintln(w)
}
