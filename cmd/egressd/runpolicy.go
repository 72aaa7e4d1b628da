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
	warnNewMemory(r.memoryWarning, r.log, stderr)
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

// warnNewMemory states, once at start, that version memory was new or
// empty before this process loaded anything (policy.Memory.NewWarning).
func warnNewMemory(msg string, log *audit.Log, stderr io.Writer) {
	if msg == "" {
		return
	}
	fmt.Fprintln(stderr, "egressd: warning:", msg)
	log.Write(audit.Event{Kind: audit.Lifecycle, Action: "version_memory_new", Msg: audit.Cap(msg, 1000)})
}
