package policy

import (
	"fmt"
	"strings"

	"github.com/egressd/egressd/internal/termsafe"
)

// Lines render what approving a binds, one line each, unindented: the
// list it binds; the list in force at its place's next load; what that
// adds over the list in force there now; and, for an id change or a
// claim of an id other places hold, those places and which of them the
// raised version floor locks out. approve's preview, its report after
// approving, "approve ID VERSION" and state list all print these lines,
// so no path shows an approval as less than it is. stateDir names the
// version memory in the commands the lines print.
func (a Approval) Lines(stateDir string) []string {
	if a.Entries == nil {
		return nil
	}
	lines := []string{"binds the list: " + listOrNone(a.Entries)}
	switch {
	case a.Waits:
		lines = append(lines, fmt.Sprintf("in force at the next load: %s %s (%s); %s %s still waits for approval (%s shows it)",
			a.ID, a.InForce.Version, listOrNone(a.InForce.Entries), a.ID, a.Version,
			WithState("egressd approve "+termsafe.ShellWord(a.ID)+" "+termsafe.ShellWord(a.Version), stateDir)))
	case a.movesID():
		lines = append(lines, fmt.Sprintf("in force at the next load: %s %s (%s)", a.ID, a.Version, listOrNone(a.Entries)))
	}
	if a.Over != "" {
		lines = append(lines, "adds over "+a.Over+": "+listOrNone(a.Adds))
	}
	if len(a.Shares) > 0 {
		lines = append(lines, fmt.Sprintf("%s is bound to %s too: approving this shares %s with it, one list in force and one version floor", a.ID, strings.Join(a.Shares, ", "), a.ID))
		lines = append(lines, fmt.Sprintf("one serve serves an id from one entry: a serve whose config holds this place and %s serves %s there alone; this place keeps its last good policy until that serve restarts, and is refused from then on (nothing allowed) until one of them leaves the config", strings.Join(a.Shares, ", "), a.ID))
	}
	if a.Floor != "" {
		for _, place := range a.Shares {
			lines = append(lines, fmt.Sprintf("%s runs %s %s: its next load will be refused as lower than %s", place, a.ID, a.Floor, a.Version))
		}
		if len(a.Shares) == 0 {
			lines = append(lines, fmt.Sprintf("%s's version floor rises from %s to %s: a load of a lower version will be refused", a.ID, a.Floor, a.Version))
		}
	}
	return lines
}

// listOrNone is a list as the approve lines print it.
func listOrNone(entries []string) string {
	if len(entries) == 0 {
		return "(nothing: no egress)"
	}
	return strings.Join(entries, " ")
}
