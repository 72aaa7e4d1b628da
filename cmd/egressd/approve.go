package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/internal/termsafe"
	"github.com/egressd/egressd/policy"
)

func runApprove(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("approve", `usage: egressd approve [--state DIR] [--yes] [--folder PLACE] [--digest DIGEST] ID VERSION
       egressd approve [--state DIR] [--yes] [--new-id] --manifest PATH

Approves a manifest version whose network list adds entries, whose id
changed in a folder egressd knows, or whose folder claims an id version
memory binds to another folder (the folder then carries the id too, and
shares its version floor). ID VERSION alone shows what waits, as egressd
loaded it (what it adds, its list digest), and approves nothing: the
manifest file may have changed since. --digest DIGEST ID VERSION approves
the id's own pending widening with that digest. An id change or a claim of
a folder the id is not bound to is approved only by naming that folder:
--folder PLACE --digest DIGEST ID VERSION (egressd state list prints the
command for each). --manifest approves that manifest's list,
seen or not (if a different list waits at its version, it says so). What
an approval binds (its list, what it adds, an id change) is printed
before anything is approved: on a terminal approve asks (y/N); otherwise
it refuses unless --yes is given. Every binding made is printed. A running
"egressd serve" applies it on its next reload (SIGHUP).`, stderr)
	state := fs.String("state", policy.DefaultStateDir(), "version memory directory")
	manifest := fs.String("manifest", "", "approve this manifest file or folder's list")
	digest := fs.String("digest", "", "with ID VERSION: approve only the pending list with this digest (sha256:…)")
	folder := fs.String("folder", "", "with ID VERSION: approve the id change or claim waiting at this folder (or \"listener ADDR\"), not the id's widening")
	newID := fs.Bool("new-id", false, "with --manifest: the id was never loaded; record its list as the first approved one")
	yes := fs.Bool("yes", false, "approve what is shown without asking (needed when stdin is not a terminal)")
	pos, err := parseAnywhere(fs, args)
	if err != nil {
		return exitUsage
	}
	asks, previewElsewhere := asksOn(os.Stdin, *yes, stdout)
	stdout, stderr = termsafe.Lines(stdout), termsafe.Lines(stderr)
	if (*manifest == "") == (len(pos) == 0) || (*manifest == "" && len(pos) != 2) || (*newID && *manifest == "") || (*digest != "" && *manifest != "") || (*folder != "" && *manifest != "") {
		fs.Usage()
		return exitUsage
	}
	if err := memoryThere(*state, *newID); err != nil {
		fmt.Fprintln(stderr, err)
		return exitFail
	}
	shown := policy.PreviewMemory(*state)
	q := approval{newID: *newID, digest: *digest}
	if *manifest != "" {
		m, file, ps, loadErr := allowlist.Load(*manifest, &allowlist.Rules{})
		if loadErr == nil && m == nil {
			loadErr = fmt.Errorf("%s: the manifest has errors; run egressd check:\n%s", file, ps.Errors())
		}
		if loadErr != nil {
			fmt.Fprintln(stderr, "egressd approve:", loadErr)
			return exitFail
		}
		q.manifest, q.place = m, policy.ManifestPlace(file)
	} else if *digest == "" && showPending(shown, *state, pos[0], pos[1], stderr) {
		return exitFail
	} else {
		q.id, q.version = pos[0], pos[1]
		if *folder != "" {
			q.place = *folder // version memory reads it (an exact place first)
		}
	}
	preview, err := q.apply(shown, nil)
	if err == nil && len(preview) == 0 {
		err = policy.ErrMemoryChanged // never: a preview that binds nothing has failed
	}
	if err != nil {
		printLines(stderr, "egressd approve: "+err.Error())
		return exitFail
	}
	showApprovals(stdout, preview, *state)
	if asks && previewElsewhere {
		showApprovals(stderr, preview, *state)
	}
	if code := confirm(os.Stdin, *yes, stderr); code != exitOK {
		return code // nothing written: not even a new state folder
	}
	mem, err := policy.OpenMemory(*state)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFail
	}
	// The file bound must be the one shown, or written over it: an older
	// copy restored while the operator read is refused (round 54).
	mem.Follows(shown)
	// Only what was shown is bound: if version memory changed while the
	// operator read (another egressd loaded the id), nothing is.
	made, err := q.apply(mem, preview)
	if err != nil {
		printLines(stderr, "egressd approve: "+err.Error())
		return exitFail
	}
	for _, a := range made {
		fmt.Fprintf(stdout, "approved %s %s, list digest %s (%s) in %s\n", a.ID, a.Version, a.Digest, a.What, mem.Path())
		showBinding(stdout, a, *state)
	}
	fmt.Fprintln(stdout, "reload egressd serve to apply it: systemctl reload egressd, or kill -HUP the serve process (not pidof egressd: every egressd run passes SIGHUP to its program)")
	return exitOK
}

// showPending prints what waits for approval of id at version, as version
// memory recorded it, with the command that approves each list by its
// digest, and reports whether anything waits. ID VERSION alone binds
// nothing: the manifest file may have been swapped since egressd loaded
// it, so the operator approves the list shown here, by its digest.
func showPending(mem *policy.Memory, stateDir, id, version string, stderr io.Writer) bool {
	s, err := mem.Read()
	if err != nil {
		return false // ApprovePending reports it
	}
	lists := s.PendingLists(id, version, stateDir)
	if len(lists) == 0 {
		return false
	}
	fmt.Fprintf(stderr, "egressd approve: nothing approved; %s %s waits for approval with the list egressd loaded, which may not be the file as it is now:\n", id, version)
	for _, l := range lists {
		what := policy.WhatWidening
		switch {
		case l.Place != "" && l.From == "":
			what = "the claim of " + l.Place + " to " + id
		case l.Place != "":
			what = "the id change of " + l.Place + " from " + l.From
		}
		if l.Adds != nil {
			what += ", adds " + strings.Join(l.Adds, " ")
		}
		fmt.Fprintf(stderr, "  %s, list digest %s: %s\n", what, l.Digest, l.Command)
		if l.Place != "" {
			printLines(stderr, strings.Join(pendingListLines(l), "\n"))
		}
	}
	fmt.Fprintln(stderr, "approve the one you reviewed by its digest (egressd check PATH prints a manifest's digest), or approve the manifest you reviewed: "+policy.WithState("egressd approve --manifest PATH", stateDir))
	return true
}

// openExistingMemory opens version memory that is there: approving or
// forgetting must not leave a new, root-owned state directory behind a
// mistyped --state. Only a first list (--new-id) may create it.
func openExistingMemory(dir string, create bool) (*policy.Memory, error) {
	if err := memoryThere(dir, create); err != nil {
		return nil, err
	}
	return policy.OpenMemory(dir)
}

// memoryThere says why version memory at dir cannot be used: it is not
// there, and create (a first list) does not allow making it.
func memoryThere(dir string, create bool) error {
	if _, err := os.Stat(dir); err != nil && !create {
		return fmt.Errorf("no version memory at %s (%v): egressd has loaded nothing with this --state", dir, err)
	}
	return nil
}

// pendingListLines show what approving the list an id change or a claim
// waits with binds (policy.Approval.Lines, as approve's preview prints
// them): a digest alone tells the operator nothing about what the new id
// would be allowed.
func pendingListLines(l policy.PendingList) []string {
	if l.Entries == nil {
		return []string{"    the list is not in version memory (an earlier egressd recorded the change without it): review the manifest and approve it with egressd approve --manifest PATH"}
	}
	lines := make([]string, len(l.Lines))
	for i, line := range l.Lines {
		lines[i] = "    " + line
	}
	return lines
}
