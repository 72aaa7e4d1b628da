package policy

import (
	"fmt"
	"os"
	"strings"

	"github.com/egressd/egressd/allowlist"
)

// An id is bound to the folders it was loaded from, as a folder is bound to
// its id (admit.go). Everything egressd keeps for an id (its version floor,
// its approved list, and the sandbox's state, which is keyed by id and
// folder) belongs to those folders. A manifest in another folder that
// claims a known id is therefore not a first load: it could read the
// integration's state or, by loading a higher version, lock its real
// versions out. Its claim waits for the operator; until then nothing is
// allowed for it, and version memory keeps nothing it says.

// FoldersOf lists, in order, the manifest folders s binds id to.
func (s State) FoldersOf(id string) []string {
	var out []string
	for _, place := range sortedKeys(s.Folders) {
		if isFolder(place) && s.Folders[place].ID == id {
			out = append(out, place)
		}
	}
	return out
}

// isFolder tells a folder's key from a listener's.
func isFolder(place string) bool { return !strings.HasPrefix(place, listenerPlace) }

// InheritsIDState reports whether folder may take over the sandbox state an
// earlier egressd kept under id alone: only when s, read before this load,
// binds id to folder and to no other folder. Otherwise that state may be
// another folder's, and it is left where it is.
func (s State) InheritsIDState(id, folder string) bool {
	owners := s.FoldersOf(id)
	return len(owners) == 1 && sameFolder(owners[0], folder)
}

// sameFolder reports whether two folder keys name one directory: the same
// key, or two spellings (a symlink, a bind mount) of one directory now. An
// integration's author controls what is in its folder, not the path the
// operator names it by, so it cannot make its folder another's.
func sameFolder(a, b string) bool {
	if a == b {
		return true
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// claimWaits returns the folders bound to m.ID when m, at places, claims
// that id from elsewhere and the claim has not passed the operator's gate;
// nil when some place is bound to the id (or passes, see idChangePasses)
// or no folder is bound to it (a first load, or an id whose folders all
// changed their ids: nothing is left to take from).
func claimWaits(s *State, places []string, m *allowlist.Manifest, in Integration) []string {
	owners := s.boundElsewhere(m.ID, places[0])
	if len(owners) == 0 {
		return nil
	}
	for _, place := range places {
		if f := s.Folders[place]; f.ID == m.ID || idChangePasses(f, m, in) {
			return nil
		}
	}
	return owners
}

// boundElsewhere lists the folders s binds id to when folder is none of
// them (in any spelling); nil when it is one, or there are none.
func (s *State) boundElsewhere(id, folder string) []string {
	owners := s.FoldersOf(id)
	for _, dir := range owners {
		if sameFolder(dir, folder) {
			return nil
		}
	}
	return owners
}

// holdClaim records that the manifest folder waits to carry m's id. The
// folder keeps the id it is bound to, if any; an unbound folder is held
// with no id, so its claim binds nothing until it is approved.
func holdClaim(s *State, folder string, m *allowlist.Manifest) {
	p := IDChange{ID: m.ID, Version: m.Version, Digest: m.Digest()}
	f := s.Folders[folder]
	if f.Pending == nil || (IDChange{ID: f.Pending.ID, Version: f.Pending.Version, Digest: f.Pending.Digest}) != p {
		f.Pending = &p
	}
	s.Folders[folder] = f
}

// claimNotice is PendingNotice for a claim: both folders, and both ways out.
func claimNotice(p *Policy) string {
	return fmt.Sprintf("%s claims the id %s %s, which version memory binds to %s; it is not that integration until the operator says so, and nothing is allowed for it until then: %s lets this folder carry the id too, or, if %s is gone, egressd state forget %s makes the next load a first load",
		p.ManifestAt, p.Manifest.ID, p.Pending, folderList(p.PendingClaimOf), p.ApproveCommand(), folderList(p.PendingClaimOf), p.Manifest.ID)
}

func folderList(dirs []string) string {
	if len(dirs) == 1 {
		return "folder " + dirs[0]
	}
	return "folders " + strings.Join(dirs, ", ")
}
