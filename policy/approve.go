package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/internal/termsafe"
	"github.com/egressd/egressd/internal/workdir"
)

// Approval says what "egressd approve" bound: one id, one version, one
// list digest, and why it needed approving.
type Approval struct {
	ID, Version, Digest string
	What                string // WhatWidening, "the id change of FOLDER from OLD", "the claim of FOLDER to ID", WhatFirstList
	// Entries is the list the approval binds.
	Entries []string
	// InForce, when Waits, is the list in force for the approval's place
	// at its next load instead of Entries: a claim or an id change to an
	// id whose own list is another, whose widening to Entries then still
	// waits. The operator is shown it before answering: it is what the
	// place may reach once approved.
	InForce Approved
	Waits   bool
	// Over names the list in force for the place now ("ID VERSION", or
	// NothingInForce for a claim), and Adds what the list in force at the
	// next load (Entries, or InForce when Waits) adds over it; Over is ""
	// for a first list.
	Adds []string
	Over string
	// Shares, for an id change or a claim, names the other places version
	// memory binds ID to ("folder DIR", or a listener's key): once
	// approved, the place shares ID with them, one list and one version
	// floor.
	Shares []string
	// Floor, for an id change or a claim above the highest version of ID
	// seen, is that version: the place's next load raises ID's floor to
	// Version, and every place bound to ID that runs below it is refused.
	Floor string
}

// NothingInForce is Over for a claim: nothing is allowed for a folder
// while its claim of an id waits.
const NothingInForce = "nothing in force for the folder"

// ErrMemoryChanged is returned by an approval that would bind anything
// else than the operator was shown: version memory changed in between.
var ErrMemoryChanged = errors.New("nothing approved: version memory changed while you were reading; run the command again")

// asShown says whether made is what the operator was shown. shown nil
// means nobody was shown anything first (the preview itself).
func asShown(made, shown []Approval) error {
	if shown != nil && !reflect.DeepEqual(made, shown) {
		return ErrMemoryChanged
	}
	return nil
}

// What an approval of an id's own list is: its widening, or the first list
// an approval binds. InForceAfter tells these from claims and id changes.
const (
	WhatWidening  = "a widening"
	WhatFirstList = "the first list"
)

// showing is binding for the list of man.
func (a Approval) showing(s *State, man *allowlist.Manifest, nowID, place string) Approval {
	return a.binding(s, approvedOf(man, "").Entries, nowID, place)
}

// movesID says whether a binds its place to an id: an id change or a
// claim, not the id's own widening or first list.
func (a Approval) movesID() bool { return a.What != WhatWidening && a.What != WhatFirstList }

// binding fills in what approving entries as a (its What set) does at its
// place in s, version memory as the approval leaves it: Entries, the list
// in force at the place's next load (InForce when it is not entries), and
// what that adds over the list in force there now, that of nowID, the id
// the place is bound to ("" for none: a claim, or a first list). The
// preview, state list and the approval all show it from here, so what the
// operator reads before answering is what the approval reports after.
func (a Approval) binding(s *State, entries []string, nowID, place string) Approval {
	a.Entries = entries
	next := entries
	if a.InForce, a.Waits = s.inForceAfter(a); a.Waits {
		next = a.InForce.Entries
	}
	if r, known := s.IDs[a.ID]; known && a.movesID() {
		a.Shares = boundOtherThan(s, []string{place}, a.ID)
		if allowlist.CompareVersions(a.Version, r.Version) > 0 {
			a.Floor = r.Version
		}
	}
	switch r, known := s.IDs[nowID]; {
	case nowID == "" && a.What == WhatFirstList:
	case nowID == "":
		a.Over, a.Adds = NothingInForce, next
	case known:
		a.Over, a.Adds = nowID+" "+r.Approved.Version, addsOver(next, r.Approved.Entries)
	}
	return a
}

// addsOver lists the entries of next that approved lacks.
func addsOver(next, approved []string) []string {
	have := map[string]bool{}
	for _, e := range approved {
		have[e] = true
	}
	var out []string
	for _, e := range next {
		if !have[e] {
			out = append(out, e)
		}
	}
	return out
}

// Places are where version memory binds an id: the manifest's place
// (ManifestPlace), and nothing else. A listener is not a place: an
// address the operator gives to another integration (a recycled port or
// socket path) is a new integration, never a rename of whoever used the
// address before, and one place's approved list is never put in force for
// another place's manifest. listen is kept for the callers' sake and
// ignored.
func Places(manifestFile, _ string) []string {
	return []string{ManifestPlace(manifestFile)}
}

// listenerPlace prefixes a listener's key in version memory written by an
// egressd that bound ids to listeners too. Such records are kept and
// shown, never judged by: see Places.
const listenerPlace = "listener "

// ManifestPlace is the key version memory binds an id to, and the place
// the sandbox's state is named after: the manifest's folder when the file
// has one of the two standard names (voiceos.integration.json,
// manifest.json), which a folder holds at most one of each, and otherwise
// the manifest file itself. A folder may hold several manifest files of
// other names (m/a.json, m/b.json), each an integration of its own; keyed
// by the folder they shared one identity, and the second was taken for a
// rename of the first and ran with its list and state. A standard-named
// manifest keeps the folder as its place, so version memory and state
// written before stay valid.
//
// The path is absolute and clean, as the operator named it (on the
// command line or in the config). Symlinks are not resolved: the
// integration's place is the path the operator gave, so a deploy link
// swapped to a new release ("ln -sfn releases/v2 current") leaves it in
// the same place, with the same bindings and the same sandbox state. Two
// spellings of one place are two places: a second spelling claims the id
// and waits (see sameFolder).
//
// manifestFile is a file egressd read (allowlist.Load, LoadIn): the place
// follows from its name alone, never from a second look at the path, which
// the author can have swapped for a folder since the read (round 33: a
// folder exchanged in at the manifest's name after the read made the place
// the manifest's own path, new to version memory, and a new id there a
// first load).
func ManifestPlace(manifestFile string) string {
	file := absClean(manifestFile)
	switch filepath.Base(file) {
	case allowlist.VoiceOSFile, allowlist.SollarFile:
		return filepath.Dir(file)
	}
	return file
}

func absClean(name string) string {
	if abs, err := workdir.Abs(name); err == nil {
		return abs
	}
	return filepath.Clean(name)
}

// isDir reports whether path is a directory. A directory is a folder
// place whatever its name: a folder literally named manifest.json, named
// on the command line (approve --folder, state forget --folder), is that
// folder, never the manifest file of its parent, whose binding a forget
// would otherwise drop (round 30, s7c).
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// placeIn is the place the operator names in s: the name itself when s
// holds a place of exactly that name (as "egressd state list" prints it),
// otherwise PlaceOf(name). A place named like a manifest file, bound by an
// older egressd or a race since closed, is then the place pasted from
// state list even once a file stands at its path again, never its
// parent's (round 33: forget --folder acted on the parent folder).
func placeIn(s *State, name string) string {
	if strings.HasPrefix(name, listenerPlace) {
		return name
	}
	if exact := absClean(name); s != nil {
		if _, ok := s.Folders[exact]; ok {
			return exact
		}
	}
	return PlaceOf(name)
}

// ApprovePending approves what egressd saw and holds as pending for id at
// version. With place "" it approves only the id's own widening: what
// waits for the folders already bound to id. An id change or a claim at
// another place (a folder or a listener) is never approved with it, nor by
// a command that does not name that place: approving one folder's widening
// must not hand the id to a folder that copied its version and list. With
// place set (a folder, a manifest file, or "listener ADDR", read by placeIn) it approves the id change or
// claim waiting there, and the same change on a listener that served the
// same old id (a folder and its listener are one integration). Each
// approval binds to the digest egressd recorded, so another list at that
// version is not approved; digest, if not "", picks the record. It returns
// every binding it made.
//
// shown is what the operator was shown (this call's result on
// PreviewMemory): if the approval would bind anything else, version memory
// changed in between, and it binds nothing and returns ErrMemoryChanged.
// shown is nil only for the preview itself.
func (m *Memory) ApprovePending(id, version, digest, place string, shown []Approval) ([]Approval, error) {
	var made []Approval
	err := m.update(func(s *State) error {
		made = nil
		if place != "" {
			place = placeIn(s, place) // as the operator named it
		}
		all := pendingOf(s, id, version)
		var cands []pendingRecord
		for _, c := range all {
			if digest == "" || c.Digest == digest {
				cands = append(cands, c)
			}
		}
		picked := pickPending(cands, place)
		switch {
		case len(cands) == 0 && len(all) > 0:
			return fmt.Errorf("no pending record of %s %s has list digest %s; pending:\n%s", id, version, digest, listPending(all, m.dir))
		case len(cands) == 0:
			return m.notPending(s, id, version)
		case len(picked) == 0 && place == "":
			return fmt.Errorf("%s %s waits for approval only as an id change or a claim of another place, and approving %s approves only what waits for the folders bound to it; approve a place's change by naming it; pending:\n%s", id, version, id, listPending(cands, m.dir))
		case len(picked) == 0:
			return fmt.Errorf("nothing of %s %s waits for approval at %s; pending:\n%s", id, version, place, listPending(cands, m.dir))
		}
		for _, c := range picked {
			// The id's record may have moved past a change or claim held
			// earlier: every load would refuse it, so no approval binds it.
			if r, known := s.IDs[c.ID]; known && c.Place != "" {
				if err := versionFloor(r, c.ID, c.Version, c.Digest, m.dir); err != nil {
					return fmt.Errorf("%s of %s %s cannot apply, so it is not approved: %w", c.what(), c.ID, c.Version, err)
				}
			}
			made = append(made, c.approve(s))
		}
		return asShown(made, shown)
	})
	if err != nil {
		return nil, err // nothing was bound
	}
	return made, nil
}

// pickPending selects from cs what one approval at place binds: the
// widening when place is "", else the record at place and the listeners
// changed from the same old id with the same list.
func pickPending(cs []pendingRecord, place string) []pendingRecord {
	var out []pendingRecord
	for _, c := range cs {
		if c.Place == place {
			out = append(out, c)
		}
	}
	if place == "" || len(out) == 0 || out[0].From == "" {
		return out
	}
	for _, c := range cs {
		if c.Place != place && !isFolder(c.Place) && c.From == out[0].From && c.Digest == out[0].Digest {
			out = append(out, c)
		}
	}
	return out
}

// PlaceOf is the version memory key of the place the operator names in
// "egressd approve --folder": a listener as "listener ADDR", as egressd
// state list prints it, a folder, or a manifest file as ManifestPlace
// keys it (a standard-named file stands for its folder).
func PlaceOf(name string) string {
	if strings.HasPrefix(name, listenerPlace) {
		return name
	}
	if dir := absClean(name); isDir(dir) {
		return dir
	}
	return ManifestPlace(name)
}

// ApproveCommandFor is the command that approves the pending record at
// place ("" for a widening) of id at version with digest.
func ApproveCommandFor(place, digest, id, version string) string {
	if place == "" {
		return fmt.Sprintf("egressd approve --digest %s %s %s", digest, id, version)
	}
	return fmt.Sprintf("egressd approve --folder %s --digest %s %s %s", termsafe.ShellWord(place), digest, id, version)
}

// pendingRecord is one thing waiting for approval of id at version: an id
// change at a place (a folder or a listener), or a widening of the id's
// own record (place "").
type pendingRecord struct {
	ID, Version, Place, Digest, From string
	// Entries is the list waiting, as egressd loaded it (nil when an
	// earlier egressd recorded an id change without it).
	Entries []string
}

// line shows c with the command that approves it in the version memory
// at stateDir.
func (c pendingRecord) line(stateDir string) string {
	what := WhatWidening
	if c.Place != "" {
		what = c.what()
	}
	return fmt.Sprintf("  %s, list digest %s: %s", what, c.Digest, WithState(ApproveCommandFor(c.Place, c.Digest, c.ID, c.Version), stateDir))
}

// what names an id change or a claim.
func (c pendingRecord) what() string {
	if c.From == "" {
		return fmt.Sprintf("the claim of %s to %s", c.Place, c.ID)
	}
	return fmt.Sprintf("the id change of %s from %s", c.Place, c.From)
}

func listPending(cs []pendingRecord, stateDir string) string {
	lines := make([]string, len(cs))
	for i, c := range cs {
		lines[i] = c.line(stateDir)
	}
	return strings.Join(lines, "\n")
}

// pendingOf lists what waits for approval of id at version, in place order.
func pendingOf(s *State, id, version string) []pendingRecord {
	var out []pendingRecord
	for _, place := range sortedKeys(s.Folders) {
		f := s.Folders[place]
		// A change no load would take is no candidate (round 45: approve
		// printed its command, which then failed); notPending names it.
		if p := f.Pending; p != nil && (!p.Approved || s.ApprovalOutdated(place)) && p.ID == id && sameVersion(p.Version, version) && s.PendingCannotApply(place) == "" {
			out = append(out, pendingRecord{ID: id, Version: p.Version, Place: place, Digest: p.Digest, From: f.ID, Entries: p.Entries})
		}
	}
	if r, ok := s.IDs[id]; ok && sameVersion(r.Version, version) && r.Approved.Digest != r.Digest && r.Approvals[r.Version] != r.Digest {
		out = append(out, pendingRecord{ID: id, Version: r.Version, Digest: r.Digest, Entries: r.Pending})
	}
	return out
}

// sameVersion reports whether two versions are one to version memory:
// build metadata does not count (semver), so "1.0.1-rc.1+x", as a run
// printed it from the manifest, names the 1.0.1-rc.1 that waits (round
// 47: the command printed was refused when pasted).
func sameVersion(a, b string) bool {
	a, _, _ = strings.Cut(a, "+")
	b, _, _ = strings.Cut(b, "+")
	return a == b
}

// approve marks c approved in s and says what it bound.
func (c pendingRecord) approve(s *State) Approval {
	a := Approval{ID: c.ID, Version: c.Version, Digest: c.Digest}
	if c.Place != "" {
		f := s.Folders[c.Place]
		f.Pending.Approved, f.Pending.Shown = true, s.targetState(c.ID, c.Place)
		s.Folders[c.Place] = f
		a.What = c.what()
		if owners := s.FoldersOf(c.ID); len(owners) > 0 {
			a.What += " (bound to " + folderList(owners) + ")"
		}
		if c.Entries != nil {
			a = a.binding(s, c.Entries, c.From, c.Place)
		}
		return a
	}
	r := s.IDs[c.ID]
	if r.Approvals == nil {
		r.Approvals = map[string]string{}
	}
	r.Approvals[c.Version] = c.Digest
	s.IDs[c.ID] = r
	a.What = WhatWidening
	if c.Entries != nil {
		a = a.binding(s, c.Entries, c.ID, "")
	}
	return a
}

// notPending says why nothing waits for id at version.
func (m *Memory) notPending(s *State, id, version string) error {
	for _, place := range sortedKeys(s.Folders) {
		if p := s.Folders[place].Pending; p != nil && p.ID == id && p.Version == version {
			if why := s.PendingCannotApply(place); why != "" {
				return fmt.Errorf("%s %s waits at %s, but it cannot load, so it is not approvable: %s; %s drops it", id, version, place, why, WithState("egressd state forget --folder "+termsafe.ShellWord(place), m.dir))
			}
		}
	}
	for _, place := range sortedKeys(s.Folders) {
		if p := s.Folders[place].Pending; p != nil && p.Approved && p.ID == id && p.Version == version {
			return fmt.Errorf("%s %s is already approved at %s (list digest %s); reload egressd (SIGHUP) to apply it", id, version, place, p.Digest)
		}
	}
	r, known := s.IDs[id]
	switch {
	case known && r.Version == version && r.Approvals[version] == r.Digest && r.Approved.Digest != r.Digest:
		return fmt.Errorf("%s %s is already approved (list digest %s); reload egressd (SIGHUP) to apply it", id, version, r.Digest)
	case !known:
		return fmt.Errorf("%s is not in version memory (%s): nothing is pending for it; check the spelling (egressd state list shows what it holds)", id, m.where())
	case r.Version != version && allowlist.CompareVersions(version, r.Version) > 0:
		return fmt.Errorf("egressd has not seen %s %s (the highest version seen is %s), so there is no list to bind the approval to; approve the manifest itself: egressd approve --manifest PATH", id, version, r.Version)
	}
	if r.Approved.Digest != r.Digest && r.Approvals[r.Version] != r.Digest {
		// Another version waits: name it, or the operator takes the
		// version typed for the only one and the widening stays unseen.
		return fmt.Errorf("%s %s is not pending: %s %s is in force, and %s waits for approval, list digest %s (%s)", id, version, id, r.Approved.Version, r.Version, r.Digest, m.where())
	}
	return fmt.Errorf("%s %s is not pending: %s %s is in force (%s)", id, version, id, r.Approved.Version, m.where())
}

// ApproveManifest approves the list in man, read from folder, ahead of or
// after its load: the id change of folder, or else a widening of the id. An id never loaded is
// refused unless firstList is set: then its list is recorded as the id's
// first approved list, as its first load would. It returns every binding
// it made.
// shown is as for ApprovePending.
func (m *Memory) ApproveManifest(man *allowlist.Manifest, folder string, firstList bool, shown []Approval) ([]Approval, error) {
	digest := man.Digest()
	var made []Approval
	err := m.update(func(s *State) error {
		made = nil
		a := Approval{ID: man.ID, Version: man.Version, Digest: digest}
		f := s.Folders[folder]
		owners := s.boundElsewhere(man.ID, folder)
		_, known := s.IDs[man.ID]
		unbound := known && !s.placed(man.ID) // an earlier egressd's memory: the operator names the folder here
		if (f.ID != "" && f.ID != man.ID) || (f.ID == "" && (len(owners) > 0 || unbound)) {
			if r, known := s.IDs[man.ID]; known {
				if err := versionFloor(r, man.ID, man.Version, digest, m.dir); err != nil {
					return fmt.Errorf("%s of %s %s cannot apply, so it is not approved: %w", pendingRecord{ID: man.ID, Place: folder, From: f.ID}.what(), man.ID, man.Version, err)
				}
			}
			p := changeTo(man)
			p.Approved, p.Shown = true, s.targetState(man.ID, folder)
			f.Pending = &p
			s.Folders[folder] = f
			a.What = pendingRecord{ID: man.ID, Place: folder, From: f.ID}.what()
			if len(owners) > 0 {
				a.What += " (bound to " + folderList(owners) + ")"
			}
			made = append(made, a.showing(s, man, f.ID, folder)) // f.ID "": a claim
			return asShown(made, shown)
		}
		r, known := s.IDs[man.ID]
		switch {
		case !known && !firstList:
			return fmt.Errorf("%s has never been loaded (%s): check the spelling, or pass --new-id to record this list as its first approved list", man.ID, m.where())
		case !known:
			s.IDs[man.ID] = Record{Version: man.Version, Digest: digest, Approved: approvedOf(man, digest)}
			s.Folders[folder] = Folder{ID: man.ID}
			a.What = WhatFirstList
			made = append(made, a.showing(s, man, "", folder))
			return asShown(made, shown)
		case allowlist.CompareVersions(man.Version, r.Version) < 0:
			return fmt.Errorf("%s %s is lower than %s, seen before (%s); versions only go up", man.ID, man.Version, r.Version, m.where())
		case man.Version == r.Version && digest != r.Digest && r.Approved.Digest != r.Digest:
			return fmt.Errorf("the manifest in %s (list digest %s) is not the list that waits for approval as %s %s (list digest %s, which adds %s): the file changed since egressd loaded it; see what waits with egressd state list, or give the manifest you reviewed a version above %s", folder, digest, man.ID, man.Version, r.Digest, orNothing(r.Adds()), r.Version)
		case man.Version == r.Version && digest != r.Digest:
			return fmt.Errorf("%s %s was seen with another list (%s); a new list needs a new version", man.ID, man.Version, r.Digest)
		}
		if r.Approvals == nil {
			r.Approvals = map[string]string{}
		}
		r.Approvals[man.Version] = digest
		s.IDs[man.ID] = r
		a.What = WhatWidening
		made = append(made, a.showing(s, man, man.ID, folder))
		return asShown(made, shown)
	})
	if err != nil {
		return nil, err // nothing was bound
	}
	return made, nil
}

// Forget removes id from version memory: its record, the folders bound to
// it and id changes waiting to become it. Its next load is a first load,
// with any list: the operator's deliberate way out. It refuses while a
// place bound to id holds an id change that waits for approval: dropping
// the binding would make the new id's next load a first load too, which
// releases the change unapproved; and while that change is approved but
// not loaded yet, for the same reason. It returns the id changes it dropped.
func (m *Memory) Forget(id string) (Record, []string, error) {
	var r Record
	var dropped []string
	err := m.update(func(s *State) error {
		dropped = nil
		found := false
		r, found = s.IDs[id]
		for _, place := range sortedKeys(s.Folders) {
			f := s.Folders[place]
			if f.ID != id || f.Pending == nil {
				continue
			}
			p := f.Pending
			if p.Approved {
				// The approval is bound to this folder's binding: without it the
				// new id's next load is a first load, with whatever list it has
				// by then, and the approval covers nothing.
				return fmt.Errorf("%s, bound to %s, holds an approved id change to %s %s that has not loaded yet; forgetting %s now would let %s load as a first load, with any list. Let egressd load it first (a reload of serve, or the next run), then forget %s (%s)", place, id, p.ID, p.Version, id, p.ID, id, m.where())
			}
			return fmt.Errorf("%s, bound to %s, holds an id change to %s %s that waits for approval; forgetting %s would let %s load as a first load, with any list. Approve the change first (%s), or %s; then forget %s (%s)", place, id, p.ID, p.Version, id, p.ID, WithState(ApproveCommandFor(place, p.Digest, p.ID, p.Version), m.dir), restoreTheID, id, m.where())
		}
		// A claim of id by a place bound to nothing else: once id is
		// forgotten, whichever place loads it first takes it as a first
		// load, the claimant's wider list included.
		for _, place := range sortedKeys(s.Folders) {
			if f := s.Folders[place]; f.ID == "" && f.Pending != nil && f.Pending.ID == id {
				return fmt.Errorf("%s claims %s %s, which waits for approval; forgetting %s would let whichever folder loads it first take it as a first load, with its list, this one included. Drop the claim first (%s), and make sure that folder's manifest no longer names %s, or approve it if that folder is %s now; then forget %s (%s)", place, id, f.Pending.Version, id, WithState("egressd state forget --folder "+termsafe.ShellWord(place), m.dir), id, id, id, m.where())
			}
		}
		if found && len(r.Pending) > 0 && r.Approvals[r.Version] != r.Digest { // waiting, not approved and not yet loaded
			// Said, not refused: forgetting is the way back from a version
			// floor, and the operator must see what it releases (round 36:
			// serve's rollback advice, then forget, put a waiting widening's
			// list in force at the first load, and forget did not say so).
			dropped = append(dropped, fmt.Sprintf("the gate on %s %s's list (%s), which waited for approval: a first load takes whatever list the manifest has then, that one included", id, r.Version, strings.Join(r.Pending, " ")))
		}
		delete(s.IDs, id)
		for _, place := range sortedKeys(s.Folders) {
			f := s.Folders[place]
			if f.ID == id {
				delete(s.Folders, place)
				found = true
			} else if f.Pending != nil && f.Pending.ID == id {
				dropped = append(dropped, fmt.Sprintf("the pending id change of %s to %s %s (it stays bound to %s)", place, id, f.Pending.Version, f.ID))
				f.Pending = nil
				s.Folders[place] = f
				if f.ID == "" { // a claim of id, bound to nothing else
					delete(s.Folders, place)
				}
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s is not in version memory (%s)", id, m.where())
		}
		return nil
	})
	return r, dropped, err
}

// PendingCannotApply says why the id change or claim waiting at place can
// never load (the id's record has since passed its version, or holds that
// version with another list), or "" when an approval would apply it.
func (s *State) PendingCannotApply(place string) string {
	f := s.Folders[place]
	if f.Pending == nil {
		return ""
	}
	if r, known := s.IDs[f.Pending.ID]; known && versionFloor(r, f.Pending.ID, f.Pending.Version, f.Pending.Digest, "") != nil {
		return fmt.Sprintf("version memory has seen %s %s since (list digest %s); a load takes %s only above it", f.Pending.ID, r.Version, r.Digest, f.Pending.ID)
	}
	return ""
}

// restoreTheID is the other way out of a waiting id change that forget
// names. Forget does not read the manifest to see the id restored: the
// author could restore it for the forget and change it again after, and
// the folder, its binding gone, would load the new id as a first load. A
// load that sees the folder's own id again drops the change and keeps the
// binding, so the refusal says one must run.
const restoreTheID = "restore the manifest's id and let egressd load it (a reload of serve, or the next run), which drops the change"

// ForgetFolder removes what version memory holds for the place the
// operator names (placeIn: a folder, a manifest file, or "listener
// ADDR"): its binding to an id, or a claim that waits there. The place's
// next load of an id bound elsewhere, or of one now bound to no place,
// waits for the operator again; a new id loads as a new folder's would.
// It refuses while an id change waits there, as Forget does. It returns
// the place and the record it removed.
func (m *Memory) ForgetFolder(name string) (place string, f Folder, err error) {
	err = m.update(func(s *State) error {
		place = placeIn(s, name)
		var found bool
		if f, found = s.Folders[place]; !found {
			return fmt.Errorf("%s is not in version memory (%s)", place, m.where())
		}
		// The binding is what makes an id change there wait: dropped with
		// the change, the next load takes the new id as a first load
		// (round 22).
		if p := f.Pending; f.ID != "" && p != nil {
			return fmt.Errorf("%s, bound to %s, holds an id change to %s %s that waits for approval; forgetting the folder would let %s load as a first load, with its list. Approve the change (%s), or %s, first (%s)", place, f.ID, p.ID, p.Version, p.ID, WithState(ApproveCommandFor(place, p.Digest, p.ID, p.Version), m.dir), restoreTheID, m.where())
		}
		delete(s.Folders, place)
		return nil
	})
	return place, f, err
}

// PendingList is one list that waits for the operator's approval of an id
// at a version, as version memory recorded it when egressd loaded it.
type PendingList struct {
	ID, Version, Digest string
	// Place and From name an id change: the folder or listener, and the id
	// it was bound to. Both are "" for a widening.
	Place, From string
	// Entries are the list that waits, as egressd loaded it; nil when an
	// earlier egressd recorded an id change without it.
	Entries []string
	// InForce, Waits, Over and Adds are as in Approval: what approving
	// the list would put in force at the place's next load, and what that
	// adds over what is in force there now; unset when Entries is nil.
	InForce Approved
	Waits   bool
	Over    string
	Adds    []string
	// Command approves this list, and only it.
	Command string
	// Lines render what approving the list binds (Approval.Lines); nil
	// when Entries is nil.
	Lines []string
}

// PendingLists lists what waits for approval of id at version, so that
// "egressd approve" can show the operator what a digest approves before
// binding it: the manifest file may have been swapped since it loaded.
// Each Command names stateDir, the version memory s was read from.
func (s *State) PendingLists(id, version, stateDir string) []PendingList {
	var out []PendingList
	for _, c := range pendingOf(s, id, version) {
		l := PendingList{ID: id, Version: version, Digest: c.Digest, Place: c.Place, From: c.From, Entries: c.Entries, Command: WithState(ApproveCommandFor(c.Place, c.Digest, id, version), stateDir)}
		if c.Entries != nil {
			a := Approval{ID: id, Version: version, Digest: c.Digest, What: WhatWidening}
			nowID := c.ID
			if c.Place != "" {
				a.What, nowID = c.what(), c.From
			}
			a = a.binding(s, c.Entries, nowID, c.Place)
			l.InForce, l.Waits, l.Over, l.Adds, l.Lines = a.InForce, a.Waits, a.Over, a.Adds, a.Lines(stateDir)
		}
		out = append(out, l)
	}
	return out
}

// Adds are the entries of the pending list that the list in force lacks.
func (r Record) Adds() []string { return addsOver(r.Pending, r.Approved.Entries) }

func orNothing(entries []string) string {
	if len(entries) == 0 {
		return "nothing egressd recorded"
	}
	return strings.Join(entries, " ")
}

// inForceAfter is the list of a's id in force at the next load of a's
// place once a, of entries, is approved, when that is not entries: a claim
// or an id change binds the place to the id, and the next load judges the
// list as the id's (admit): where it adds over the id's approved list and
// no approval of the id's own covers it, the id's widening to it still
// waits, and the id's last approved list is what the place runs under.
// ok is false when entries are the list in force, and for a's own widening
// or first list, which the next load puts in force.
func (s State) inForceAfter(a Approval) (inForce Approved, ok bool) {
	r, found := s.IDs[a.ID]
	if !found || a.What == WhatWidening || a.What == WhatFirstList || r.Approved.Digest == a.Digest ||
		r.Approvals[a.Version] == a.Digest || len(addsOver(a.Entries, r.Approved.Entries)) == 0 {
		return Approved{}, false
	}
	return r.Approved, true
}
