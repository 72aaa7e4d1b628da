package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/egressd/egressd/audit"
)

// announcePolicy writes the policy event "serve" writes for a load, and
// states on stderr a widening or id change that waits for the operator:
// the program's refusals then name the approve command too.
func (r *runSetup) announcePolicy(stderr io.Writer) {
	o := r.loaded
	ev := audit.Event{Kind: audit.Policy, Integration: o.ID, IntegrationVersion: o.Version, Generation: o.Generation,
		Action: string(o.Result), Pending: o.Pending, Manifest: o.Key}
	ev.Claim = r.policy.Claim()
	ev.Entries = r.policy.InForceEntries()
	notes := o.Warnings
	if o.Notice != "" {
		fmt.Fprintln(stderr, "egressd: warning:", o.Notice)
		notes = append(notes, o.Notice)
	}
	ev.Msg = audit.Cap(strings.Join(notes, "; "), 1000)
	r.log.Write(ev)
}
