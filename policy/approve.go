package policy

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/egressd/egressd/allowlist"
)

// Approval says what "egressd approve" bound: one id, one version, one
// list digest, and why it needed approving.
type Approval struct {
	ID, Version, Digest string
	What                string // "a widening", "the id change of FOLDER from OLD", "the first list"
}

// Places are where version memory binds an id: the manifest's folder and,
// for serve, a listener with a stable name (not port 0). A new id at either
// waits for the operator: a new install folder on the same listener is as
// much the same integration as the same folder.
func Places(manifestFile, listen string) []string {
	places := []string{FolderOf(manifestFile)}
	if listen != "sandbox" && listen != "explain" && listen != "" && !strings.HasSuffix(listen, ":0") {
		places = append(places, listenerPlace+listen)
	}
	return places
}

// listenerPlace prefixes a listener's key; a folder's key is an absolute path.
const listenerPlace = "listener "

// FolderOf is the key version memory binds an id to: the manifest file's
// folder, absolute, symlinks resolved, so two spellings of one folder are
// one folder.
func FolderOf(manifestFile string) string {
	dir, err := filepath.Abs(filepath.Dir(manifestFile))
	if err != nil {
		return filepath.Dir(manifestFile)
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return real
	}
	return dir
}

// ApprovePending approves what egressd saw and holds as pending for id at
// version: a widening, or an id change in a folder. It binds the approval
// to the digest egressd recorded, so another list at that version is not
// approved. A version egressd has not seen cannot be approved this way.
func (m *Memory) ApprovePending(id, version string) (Approval, error) {
	var a Approval
	err := m.update(func(s *State) error {
		for _, dir := range sortedKeys(s.Folders) {
			f := s.Folders[dir]
			if p := f.Pending; p != nil && p.ID == id && p.Version == version {
				p.Approved = true
				s.Folders[dir] = f
				a = Approval{ID: id, Version: version, Digest: p.Digest, What: fmt.Sprintf("the id change of %s from %s", dir, f.ID)}
			}
		}
		if a.ID != "" {
			return nil
		}
		r, known := s.IDs[id]
		switch {
		case !known:
			return fmt.Errorf("%s is not in version memory (%s): nothing is pending for it; check the spelling (egressd state list shows what it holds)", id, m.where())
		case r.Version != version && allowlist.CompareVersions(version, r.Version) > 0:
			return fmt.Errorf("egressd has not seen %s %s (the highest version seen is %s), so there is no list to bind the approval to; approve the manifest itself: egressd approve --manifest PATH", id, version, r.Version)
		case r.Version != version || r.Approved.Digest == r.Digest:
			return fmt.Errorf("%s %s is not pending: %s %s is in force (%s)", id, version, id, r.Approved.Version, m.where())
		}
		if r.Approvals == nil {
			r.Approvals = map[string]string{}
		}
		r.Approvals[version] = r.Digest
		s.IDs[id] = r
		a = Approval{ID: id, Version: version, Digest: r.Digest, What: "a widening"}
		return nil
	})
	return a, err
}

// ApproveManifest approves the list in man, read from folder, ahead of or
// after its load. An id never loaded is refused unless firstList is set:
// then its list is recorded as the id's first approved list, as its first
// load would.
func (m *Memory) ApproveManifest(man *allowlist.Manifest, folder string, firstList bool) (Approval, error) {
	digest := man.Digest()
	a := Approval{ID: man.ID, Version: man.Version, Digest: digest}
	err := m.update(func(s *State) error {
		if f, bound := s.Folders[folder]; bound && f.ID != man.ID {
			f.Pending = &IDChange{ID: man.ID, Version: man.Version, Digest: digest, Approved: true}
			s.Folders[folder] = f
			a.What = fmt.Sprintf("the id change of %s from %s", folder, f.ID)
			return nil
		}
		r, known := s.IDs[man.ID]
		switch {
		case !known && !firstList:
			return fmt.Errorf("%s has never been loaded (%s): check the spelling, or pass --new-id to record this list as its first approved list", man.ID, m.where())
		case !known:
			s.IDs[man.ID] = Record{Version: man.Version, Digest: digest, Approved: approvedOf(man, digest)}
			s.Folders[folder] = Folder{ID: man.ID}
			a.What = "the first list"
			return nil
		case allowlist.CompareVersions(man.Version, r.Version) < 0:
			return fmt.Errorf("%s %s is lower than %s, seen before (%s); versions only go up", man.ID, man.Version, r.Version, m.where())
		case man.Version == r.Version && digest != r.Digest:
			return fmt.Errorf("%s %s was seen with another list (%s); a new list needs a new version", man.ID, man.Version, r.Digest)
		}
		if r.Approvals == nil {
			r.Approvals = map[string]string{}
		}
		r.Approvals[man.Version] = digest
		s.IDs[man.ID] = r
		a.What = "a widening"
		return nil
	})
	return a, err
}

// Forget removes id from version memory: its record, the folders bound to
// it and id changes waiting to become it. Its next load is a first load,
// with any list: the operator's deliberate way out.
func (m *Memory) Forget(id string) (Record, error) {
	var r Record
	err := m.update(func(s *State) error {
		found := false
		r, found = s.IDs[id]
		delete(s.IDs, id)
		for dir, f := range s.Folders {
			if f.ID == id {
				delete(s.Folders, dir)
				found = true
			} else if f.Pending != nil && f.Pending.ID == id {
				f.Pending = nil
				s.Folders[dir] = f
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s is not in version memory (%s)", id, m.where())
		}
		return nil
	})
	return r, err
}
