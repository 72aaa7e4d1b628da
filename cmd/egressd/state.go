package main

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"unicode"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/internal/termsafe"
	"github.com/egressd/egressd/policy"
)

// runState is "egressd state list|forget": what version memory holds, and
// the operator's deliberate way to make an id start afresh.
func runState(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("state", `usage: egressd state [--state DIR] list
       egressd state [--state DIR] forget ID
       egressd state [--state DIR] forget --folder PATH

list shows what version memory holds for each id and folder, and what waits
for "egressd approve". forget removes an id: its next load is a first load,
with any list, so use it only to undo a mistake. It refuses while a folder
bound to the id holds an id change, pending or approved, that has not loaded,
and while another folder claims the id. forget --folder removes what version
memory holds for one folder (or "listener ADDR"): its binding and what waits
there; its next load of an id bound elsewhere waits for approval again.`, stderr)
	state := fs.String("state", policy.DefaultStateDir(), "version memory directory")
	folder := fs.String("folder", "", "with forget: the folder (or \"listener ADDR\") whose record to remove")
	pos, err := parseAnywhere(fs, args)
	if err != nil {
		return exitUsage
	}
	switch {
	case len(pos) == 1 && pos[0] == "list":
		mem, err := policy.ReadMemory(*state)
		if err == nil {
			var s policy.State
			if s, err = mem.Read(); err == nil {
				printState(stdout, policy.StatePath(*state), s)
				return exitOK
			}
		}
		printLine(stderr, "egressd state: %v", err) // the state folder may be the service user's: nothing of it reaches the terminal raw
		return exitFail
	case len(pos) == 1 && pos[0] == "forget" && *folder != "":
		mem, err := openExistingMemory(*state, false)
		if err != nil {
			printLine(stderr, "egressd state: %v", err)
			return exitFail
		}
		place, f, err := mem.ForgetFolder(*folder)
		if err != nil {
			printLine(stderr, "egressd state: %v", err)
			return exitFail
		}
		what := "bound to " + orNone(f.ID)
		if f.Pending != nil {
			what += fmt.Sprintf(", with %s %s waiting", f.Pending.ID, f.Pending.Version)
		}
		printLine(stdout, "forgot folder %s (%s) in %s; its next load of an id bound elsewhere waits for approval", printable(place), what, mem.Path())
		printLine(stderr, restartAfterForget)
		return exitOK
	case len(pos) == 2 && pos[0] == "forget" && *folder == "":
		mem, err := openExistingMemory(*state, false)
		if err != nil {
			printLine(stderr, "egressd state: %v", err)
			return exitFail
		}
		r, dropped, err := mem.Forget(pos[1])
		if err != nil {
			printLine(stderr, "egressd state: %v", err)
			return exitFail
		}
		printLine(stdout, "forgot %s (highest version seen: %s) in %s; its next load is a first load, with any list", pos[1], orNone(r.Version), mem.Path())
		for _, d := range dropped {
			printLine(stdout, "dropped %s", d)
		}
		printLine(stderr, restartAfterForget)
		return exitOK
	}
	fs.Usage()
	return exitUsage
}

// restartAfterForget is said after every forget (round 49): a running
// serve cannot tell what a forget removed from what an older copy of the
// file lost, and refuses both.
const restartAfterForget = "egressd state: note: an egressd serve running with this version memory keeps its last good policy and refuses reloads until it is restarted, or until another process (egressd run) loads what was forgotten again, as a first load: it cannot tell a forget from an older copy restored"

func printState(w io.Writer, file string, s policy.State) {
	fmt.Fprintf(w, "version memory: %s (%d ids, %d folders)\n", file, len(s.IDs), len(s.Folders))
	for _, id := range sortedStrings(s.IDs) {
		r := s.IDs[id]
		line := fmt.Sprintf("%s %s in force (%d entries)", id, r.Approved.Version, len(r.Approved.Entries))
		if dirs := s.FoldersOf(id); len(dirs) > 0 {
			line += "; bound to " + folders(dirs)
		}
		switch {
		case r.Approved.Digest == r.Digest:
		case r.Approvals[r.Version] == r.Digest:
			// approved, not loaded yet: no approve command to run again
			line += fmt.Sprintf("; %s approved, applies at the next load, digest %s, adds %s", r.Version, r.Digest, printable(strings.Join(r.Adds(), " ")))
		default:
			line += fmt.Sprintf("; %s pending, digest %s, adds %s: %s", r.Version, r.Digest, printable(strings.Join(r.Adds(), " ")),
				policy.WithState(policy.ApproveCommandFor("", r.Digest, id, r.Version), filepath.Dir(file)))
		}
		for _, v := range sortedStrings(r.Approvals) {
			// An approval at or below the version in force, or of the
			// version shown above as approved, says nothing the operator
			// can act on; printed beside a widening that waits with the
			// same digest it read as if that were approved (round 42).
			if allowlist.CompareVersions(v, r.Approved.Version) <= 0 || v == r.Version && r.Approvals[v] == r.Digest {
				continue
			}
			line += fmt.Sprintf("; approved %s for digest %s, not loaded", v, r.Approvals[v])
		}
		printLines(w, line)
	}
	for _, dir := range sortedStrings(s.Folders) {
		f := s.Folders[dir]
		place := "folder " + printable(dir)
		if !strings.HasPrefix(dir, "/") {
			place = printable(dir) // "listener ADDR"
		}
		line := fmt.Sprintf("%s: %s", place, f.ID)
		if f.ByApproval {
			line += " (taken by an approved id change or claim: widen: auto and pin_digest do not apply here)"
		}
		if p := f.Pending; p != nil {
			verb := "pending, digest " + p.Digest + ": " + printable(policy.WithState(policy.ApproveCommandFor(dir, p.Digest, p.ID, p.Version), filepath.Dir(file)))
			if p.Approved {
				verb = "approved, applies at the next load"
			}
			if s.ApprovalOutdated(dir) {
				verb = "approved, but " + policy.OutdatedNote + ", so it waits again; approve again: " + printable(policy.WithState(policy.ApproveCommandFor(dir, p.Digest, p.ID, p.Version), filepath.Dir(file)))
			}
			if why := s.PendingCannotApply(dir); why != "" {
				verb = "cannot load, so it is not approvable: " + why + "; " + printable(policy.WithState("egressd state forget --folder "+termsafe.ShellWord(dir), filepath.Dir(file))) + " drops it"
			}
			was := ""
			if f.ID != "" {
				was = " (was " + f.ID + ")"
			}
			claim := fmt.Sprintf("claims %s %s, bound to %s", p.ID, p.Version, folders(s.FoldersOf(p.ID)))
			switch {
			case len(s.FoldersOf(p.ID)) > 0:
			case f.ID == "": // no id of its own to change: it claims one no folder holds
				claim = fmt.Sprintf("claims %s %s, which version memory binds to no folder", p.ID, p.Version)
			default:
				claim = fmt.Sprintf("changes its id to %s %s", p.ID, p.Version)
			}
			line = fmt.Sprintf("%s%s %s; %s", place, was, claim, verb)
			if (!p.Approved || s.ApprovalOutdated(dir)) && s.PendingCannotApply(dir) == "" {
				for _, l := range s.PendingLists(p.ID, p.Version, filepath.Dir(file)) {
					if l.Place == dir {
						line += "\n" + strings.Join(pendingListLines(l), "\n")
					}
				}
			}
		}
		printLines(w, line)
	}
}

// folders names the folders an id is bound to.
func folders(dirs []string) string {
	if len(dirs) == 0 {
		return "no folder"
	}
	for i, d := range dirs {
		dirs[i] = printable(d)
	}
	if len(dirs) == 1 {
		return "folder " + dirs[0]
	}
	return "folders " + strings.Join(dirs, ", ")
}

// printable quotes a string that holds anything a terminal would act on.
func printable(s string) string {
	if !termsafe.Clean(s) || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return termsafe.ShellWord(s) // ASCII, and names these bytes alone: U+3164 and the six characters \u3164 differ
	}
	return s
}

func sortedStrings[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
