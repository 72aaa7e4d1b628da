package audit

import (
	"fmt"
	"strings"
)

// finish turns what was read into the verdict: a keyed chain read without
// its key is not intact, since only its links could be checked.
func (v *verifier) finish() Verdict {
	out := v.out
	if out.Problem == "" && len(v.linkLost) > 0 {
		out.Problem = v.linkLost[0]
	}
	if out.Problem == "" && len(v.crashes) > 0 {
		out.Problem = v.crashes[0] // every later run verified: the crash is what is left
		if n := len(v.crashes); n > 1 {
			out.Problem += fmt.Sprintf(" (and %d more run(s) ended so)", n-1)
		}
	}
	out.Intact = out.Problem == ""
	var unchecked []string
	for _, c := range out.Chains {
		if c.Keyed && len(v.keys) == 0 {
			unchecked = append(unchecked, c.ID+" (key id "+c.KeyID+")")
		}
	}
	out.CrashesOnly = !out.Intact && v.out.Problem == "" && len(v.linkLost) == 0 && len(unchecked) == 0
	if out.Intact && len(unchecked) > 0 {
		out.Intact = false
		out.Problem = fmt.Sprintf("chain %s is keyed: pass its key to check the hashes; only seq and prev links were checked", strings.Join(unchecked, ", "))
	}
	out.Proves = v.proves(out, len(unchecked) > 0)
	return out
}

// Unproven says why an intact verdict still does not show that every
// line came from this log's own runs, in order, or "": runs that do not
// name the run before them (one from another instance sharing the key can
// have been added), or an unkeyed chain no checkpoint was cross-checked
// against (whoever can write the file can add a line and recompute the
// chain). A report headlines it, and suggest says it (and refuses on
// unlinked runs): a planted line would put its host in the permission the
// operator approves.
func (v Verdict) Unproven() string {
	switch {
	case !v.Intact:
		return ""
	case v.RunsUnlinked():
		return v.Proves
	case !v.Keyed && v.Checkpoints == 0 && v.Lines > 0:
		return "the chain is unkeyed and no checkpoint was cross-checked: whoever can write the log can add or edit a line and recompute the chain (give --checkpoints with the file serve or run wrote them to, or use a key)"
	}
	return ""
}

// RunsUnlinked reports an intact verdict some run of which does not name
// the run before it: a run from elsewhere can have been added whole.
func (v Verdict) RunsUnlinked() bool {
	return v.Intact && strings.HasPrefix(v.Proves, unlinkedRuns)
}

// unlinkedRuns begins what a keyed verification proves when some run does
// not name the run before it; the report's headline repeats it.
const unlinkedRuns = "runs not linked"

// proves says what was established for the part that verified, never more
// than the verdict.
func (v *verifier) proves(out Verdict, unchecked bool) string {
	keyed := len(v.keys) > 0
	switch {
	case unchecked:
		return "nothing about the line contents: without the key only the seq and prev links were checked"
	case !out.Intact && v.out.Problem == "" && len(v.linkLost) > 0:
		return fmt.Sprintf("every line of every run was verified, but %d run(s) started after the link file was rewritten (see BROKEN): whole runs before them can have been removed without trace", len(v.linkLost))
	case !out.Intact && v.out.Problem == "" && keyed: // only crashes
		return fmt.Sprintf("every line of every run was verified and not edited, deleted, reordered or added by anyone without the key, but %d run(s) end without a clean-shutdown record (see BROKEN): whatever those runs did after their last line is not in the log", len(v.crashes))
	case !out.Intact && v.out.Problem == "":
		return fmt.Sprintf("every line of every run was verified and holds no accidental corruption (an unkeyed chain can be recomputed by whoever edits it), but %d run(s) end without a clean-shutdown record (see BROKEN): whatever those runs did after their last line is not in the log", len(v.crashes))
	case !out.Intact && out.Lines == 0:
		return "nothing: the problem is at the start"
	case !out.Intact && keyed:
		return fmt.Sprintf("only that the %d line(s) before the problem were not edited, deleted, reordered or added by anyone without the key; nothing about the rest", out.Lines)
	case !out.Intact:
		return fmt.Sprintf("only that the %d line(s) before the problem hold no accidental corruption (an unkeyed chain can be recomputed by whoever edits it); nothing about the rest", out.Lines)
	case keyed && v.unlinked > 0:
		return fmt.Sprintf(unlinkedRuns+": no line within a run was edited, deleted, reordered or added by anyone without the key, and %s, but %d run(s) do not name the run before them (see the notes): whole runs before those can have been removed, replayed or reordered without trace", closedCleanly(out), v.unlinked)
	case keyed:
		return "no line was edited, deleted, reordered or added by anyone without the key, each run follows the run before it, and " + closedCleanly(out) + ". Whole runs at the end of the last file can be removed without trace unless checkpoints are given"
	case out.Checkpoints > 0 || len(v.opts.Checkpoints) > 0:
		return "no corruption; lines up to each cross-checked checkpoint are as they were when it was written, and no chain was cut back behind its last checkpoint. An unkeyed chain does not stop a deliberate rewrite after the last checkpoint"
	}
	return "no accidental corruption, deletion or reordering. An unkeyed chain can be recomputed by whoever edits it: use a key or checkpoints to detect that"
}

// closedCleanly says how the runs ended: a run a prune receipt records as
// crashed did not close cleanly, though every chain left in the files did.
func closedCleanly(out Verdict) string {
	n := PrunedCrashes(out)
	if n == 0 {
		return "every chain was closed cleanly"
	}
	return fmt.Sprintf("every chain in the files was closed cleanly, but %d run(s) a prune receipt removed had crashed (see the notes): whatever they did after their last line is not in the log", n)
}

// PrunedCrashes counts the runs prune receipts record as crashed.
func PrunedCrashes(v Verdict) int {
	n := 0
	for _, c := range v.PrunedChains {
		if c.End == "crashed" {
			n++
		}
	}
	return n
}
