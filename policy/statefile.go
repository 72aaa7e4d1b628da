package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync"

	"golang.org/x/mod/semver"

	"github.com/egressd/egressd/allowlist"
)

// State is everything version memory holds: one Record per integration id
// and one Folder per manifest folder egressd has loaded.
type State struct {
	IDs     map[string]Record
	Folders map[string]Folder
	// Writes counts egressd's writes of the state file, in any process,
	// and Lineage names the files the last of them replaced: a running
	// process takes a read only if it descends from the file it last read
	// or wrote (older). Round 52: an older copy restored under it, taken
	// before the operator undid an approval, put the approval back in
	// force; round 53: other processes' writes over such a copy counted
	// it back up to the number the running process had seen.
	Writes  uint64
	Lineage []WriteMark
	// read is the SHA-256 of the file this state was read from or written
	// to ("" for none): what the next write names in Lineage.
	read string
}

// Record is what version memory keeps for one integration id. Records are
// kept when an id leaves the config, so it cannot come back with a lower
// version; only "egressd state forget" removes one.
type Record struct {
	// Version and Digest are the highest version seen and its list's digest.
	Version string `json:"version"`
	Digest  string `json:"digest"`
	// Approved is the list in force: the first list seen, then every
	// narrowing, and every widening that passed the operator's gate.
	Approved Approved `json:"approved"`
	// Approvals are versions the operator approved with "egressd approve",
	// each bound to the digest of the one list approved at that version.
	Approvals map[string]string `json:"approvals,omitempty"`
	// Pending is the list at Version while it waits for approval: what the
	// operator approves by its digest is shown from here, not from the
	// manifest file, which may have been swapped since.
	Pending []string `json:"pending,omitempty"`
}

// Approved is a list that is in force.
type Approved struct {
	Version string   `json:"version"`
	Digest  string   `json:"digest"`
	Entries []string `json:"entries"`
}

// Folder binds a manifest folder to the id it was approved under, so a
// manifest cannot shed its history by changing its id: a new id in a known
// folder waits for the operator like a widening. A folder with no id and a
// Pending change is bound to nothing yet: it claims an id bound to other
// folders, and waits (idfolder.go).
type Folder struct {
	ID      string    `json:"id"`
	Pending *IDChange `json:"pending,omitempty"`
	// ByApproval says the folder took ID by an id change or a claim the
	// operator approved, not by loading it first: an approval whose
	// preview said the id's widening still waits. widen: auto and
	// pin_digest never release a widening of ID here (gateWithheld).
	ByApproval bool `json:"by_approval,omitempty"`
}

// IDChange is a new id seen in a folder bound to another one.
type IDChange struct {
	ID       string `json:"id"`
	Version  string `json:"version"`
	Digest   string `json:"digest"`
	Approved bool   `json:"approved,omitempty"`
	// Entries are the list at Digest as egressd loaded it: the operator
	// approves an id change seeing the list it binds, shown from here, not
	// from the manifest file, which may have been swapped since. Memory
	// written by an earlier egressd has none.
	Entries []string `json:"entries,omitempty"`
	// Shown, once Approved, is what the operator was shown about ID when
	// approving (State.targetState): the approval holds only while that
	// still holds. Another folder may take a fresh id between the
	// approval and this folder's load (round 30, s4); applied then, the
	// change would join that folder's list and raise its version floor,
	// neither of which the preview showed.
	Shown string `json:"shown,omitempty"`
}

// changeTo is the id change to m's id, version and list.
func changeTo(m *allowlist.Manifest) IDChange {
	return IDChange{ID: m.ID, Version: m.Version, Digest: m.Digest(), Entries: approvedOf(m, "").Entries}
}

// holdChange records p as what waits at f, keeping an approval already
// given to the same id, version and digest (and adding the list to a
// record an earlier egressd wrote without it).
func (f *Folder) holdChange(p IDChange) {
	if q := f.Pending; q != nil && q.ID == p.ID && q.Version == p.Version && q.Digest == p.Digest {
		if q.Entries == nil {
			q.Entries = p.Entries
		}
		return
	}
	f.Pending = &p
}

// stateFormat marks the state file's layout. A file without it is the first
// layout: a bare object of records by id.
const stateFormat = 2

type stateDoc struct {
	Format  int               `json:"egressd_state"`
	Writes  uint64            `json:"writes,omitempty"`
	Lineage []WriteMark       `json:"lineage,omitempty"`
	IDs     map[string]Record `json:"ids"`
	Folders map[string]Folder `json:"folders"`
}

func newState() *State { return &State{IDs: map[string]Record{}, Folders: map[string]Folder{}} }

func (s *State) clone() State {
	c, err := DecodeState(s.encode())
	if err != nil {
		panic("policy: version memory does not survive its own encoding: " + err.Error())
	}
	return c
}

// encode is the state file's bytes; equal states encode equally.
func (s *State) encode() []byte {
	data, err := json.MarshalIndent(stateDoc{Format: stateFormat, Writes: s.Writes, Lineage: s.Lineage, IDs: s.IDs, Folders: s.Folders}, "", "  ")
	if err != nil {
		panic("policy: version memory cannot be encoded: " + err.Error())
	}
	return append(data, '\n')
}

// DecodeState reads a state file. Anything but what egressd writes is an
// error (null, other types, unknown keys, a non-canonical entry, a malformed
// version or digest): version memory that cannot be read whole is not
// trusted in part.
func DecodeState(data []byte) (State, error) {
	var top map[string]json.RawMessage
	if err := strictUnmarshal(data, &top); err != nil {
		return State{}, err
	}
	if top == nil {
		return State{}, errors.New("not a JSON object")
	}
	_, layout2 := top["egressd_state"]
	if err := checkStateKeys(data, layout2); err != nil {
		return State{}, err
	}
	s := newState()
	if layout2 {
		var doc stateDoc
		if err := strictUnmarshal(data, &doc); err != nil {
			return State{}, err
		}
		if doc.Format != stateFormat {
			return State{}, fmt.Errorf("egressd_state %d is not a layout this egressd reads (%d)", doc.Format, stateFormat)
		}
		if doc.IDs == nil || doc.Folders == nil {
			return State{}, errors.New(`"ids" and "folders" must be objects`)
		}
		s.IDs, s.Folders, s.Writes, s.Lineage = doc.IDs, doc.Folders, doc.Writes, doc.Lineage
	} else {
		for id, raw := range top { // the first layout: records by id
			var r Record
			if err := strictUnmarshal(raw, &r); err != nil {
				return State{}, fmt.Errorf("%s: %v", id, err)
			}
			for v, d := range r.Approvals {
				if d == "" { // approved before the version was seen: bound to no list, so honoured for none
					delete(r.Approvals, v)
				}
			}
			s.IDs[id] = r
		}
	}
	return *s, s.validate()
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

var (
	stateID     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]+(\.[a-z0-9-]+)+$`) })
	stateDigest = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sha256:[0-9a-f]{64}$`) })
	stateSum    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{64}$`) })
)

func validVersion(v string) bool { return semver.IsValid("v" + v) }

func (s *State) validate() error {
	for i, mark := range s.Lineage {
		if mark.Write >= s.Writes || (i > 0 && mark.Write <= s.Lineage[i-1].Write) || !stateSum().MatchString(mark.SHA256) || len(s.Lineage) > maxLineage {
			return fmt.Errorf("lineage: write %d is not one egressd wrote", mark.Write)
		}
	}
	for _, id := range sortedKeys(s.IDs) {
		if err := validRecord(id, s.IDs[id]); err != nil {
			return fmt.Errorf("%s: %v", id, err)
		}
	}
	for _, dir := range sortedKeys(s.Folders) {
		f := s.Folders[dir]
		claiming := f.ID == "" && f.Pending != nil && isFolder(dir) // a folder's claim of a bound id (idfolder.go)
		if dir == "" || (!claiming && !stateID().MatchString(f.ID)) {
			return fmt.Errorf("folder %q: not a folder bound to an id", dir)
		}
		if p := f.Pending; p != nil && (!stateID().MatchString(p.ID) || !validVersion(p.Version) || !stateDigest().MatchString(p.Digest)) {
			return fmt.Errorf("folder %q: a pending id change that egressd did not write", dir)
		}
		if p := f.Pending; p != nil {
			if _, err := parseApproved(p.Entries); err != nil {
				return fmt.Errorf("folder %q: %v", dir, err)
			}
		}
	}
	return nil
}

func validRecord(id string, r Record) error {
	if !stateID().MatchString(id) {
		return errors.New("not an integration id")
	}
	if !validVersion(r.Version) || !stateDigest().MatchString(r.Digest) {
		return errors.New("version or digest is not one egressd writes")
	}
	a := r.Approved
	if !validVersion(a.Version) || !stateDigest().MatchString(a.Digest) || a.Entries == nil {
		return errors.New("the approved list is not one egressd writes")
	}
	if _, err := parseApproved(a.Entries); err != nil {
		return err
	}
	if _, err := parseApproved(r.Pending); err != nil {
		return err
	}
	for v, d := range r.Approvals {
		if !validVersion(v) || !stateDigest().MatchString(d) {
			return fmt.Errorf("approval of %q is not bound to a list digest", v)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
