package main

import (
	"strings"

	"github.com/egressd/egressd/audit"
)

// auditRecords reads the run's audit log back as records.
func (e *sandboxEnv) auditRecords() []audit.Record {
	e.t.Helper()
	recs, err := audit.ReadFiles([]string{e.audit})
	if err != nil {
		e.t.Fatal(err)
	}
	return recs
}

// accountedFor returns the line that accounts for a refusal of target: its
// own line, or a summary whose folded sample lists it (refusals fold, so
// either is a trace of the attempt), and its index in recs.
func accountedFor(recs []audit.Record, target string) (audit.Record, int, bool) {
	for i, r := range recs {
		if r.Event == string(audit.Connect) && r.Decision == "deny" && r.Accounts(target) {
			return r, i, true
		}
	}
	return audit.Record{}, -1, false
}

// refusalsOf is how many refusals to targets with the given prefix the
// connect lines before index end stand for: own lines count one each, a
// summary counts all it suppressed. Only use it where nothing else in the
// run is refused, since a summary's unlisted targets have no name.
func refusalsOf(recs []audit.Record, prefix string, end int) int64 {
	var n int64
	for _, r := range recs[:end] {
		switch {
		case r.Event != string(audit.Connect) || r.Decision != "deny":
		case r.Suppressed > 0:
			n += r.Suppressed
		case strings.HasPrefix(r.HostRaw, prefix):
			n++
		}
	}
	return n
}

// indexOf is the index of the first lifecycle line with the given action,
// or len(recs).
func indexOf(recs []audit.Record, action string) int {
	for i, r := range recs {
		if r.Event == string(audit.Lifecycle) && r.Action == action {
			return i
		}
	}
	return len(recs)
}
