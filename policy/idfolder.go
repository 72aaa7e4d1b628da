package policy

import (
	"fmt"
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
// earlier egressd kept under id alone. s is version memory as read before
// this load and after as the load left it. The folder inherits only when
// after binds id to it alone, and before either did the same or bound id
// to no place at all (an earlier egressd's memory, which only the
// operator's approval of the folder's claim turns into a binding: see
// unboundClaimWaits). Otherwise that state may be another folder's, and it
// is left where it is.
func (s State) InheritsIDState(id, folder string, after State) bool {
	now := after.FoldersOf(id)
	if len(now) != 1 || now[0] != folder {
		return false
	}
	was := s.FoldersOf(id)
	_, known := s.IDs[id]
	return (len(was) == 1 && was[0] == folder) || (known && !s.placed(id))
}

// placed reports whether s binds id to a folder. A listener's binding,
// kept from an egressd that judged ids by listener too, does not say
// which folder owns the id (see Places), so it places nothing.
func (s *State) placed(id string) bool {
	for place, f := range s.Folders {
		if isFolder(place) && f.ID == id {
			return true
		}
	}
	return false
}

// sameFolder reports whether two folder keys name one folder: the same
// cleaned absolute path, as the operator named it. It never asks which
// directory a path resolves to now: the integration's author may control a
// link on its path (its own deploy link "current"), and one that points at
// another integration's folder for one load must not make its folder that
// one. A second spelling of a folder is a claim that waits.
func sameFolder(a, b string) bool { return a == b }

// unboundClaimWaits reports whether m, at places, claims an id version
// memory knows but binds to no place, folder or listener: memory written by
// an egressd from before folders were bound to ids (or an id all of whose
// places changed their ids). It cannot say which folder owns the id, so
// the first folder to load it must not become its owner: that folder
// would raise the id's floor and inherit its state. Such a claim waits for
// the operator like a claim of a bound id, unless it passed the gate.
func unboundClaimWaits(s *State, places []string, m *allowlist.Manifest, in Integration) bool {
	if _, known := s.IDs[m.ID]; !known || s.placed(m.ID) {
		return false
	}
	for _, place := range places {
		if idChangePasses(s.Folders[place], m, in) {
			return false
		}
	}
	return true
}

// claimWaits returns the folders bound to m.ID when m, at places, claims
// that id from elsewhere and the claim has not passed the operator's gate;
// nil when some place is bound to the id (or passes, see idChangePasses)
// or no folder is bound to it (a first load, or an id bound to no place:
// see unboundClaimWaits).
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
// them; nil when it is one, or there are none.
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
	f := s.Folders[folder]
	f.holdChange(changeTo(m))
	s.Folders[folder] = f
}

// claimNotice is PendingNotice for a claim: both folders, and both ways
// out, each a command that works as printed while the claim waits.
func claimNotice(p *Policy) string {
	return fmt.Sprintf("%s claims the id %s %s, which version memory binds to %s; it is not that integration until the operator says so, and nothing is allowed for it until then: %s lets this folder carry the id too, or, if %s is gone, %s drops this claim and then forgets the id, so that this folder's next load is a first load",
		p.ManifestAt, p.Manifest.ID, p.Pending, folderList(p.PendingClaimOf), p.ApproveCommand(), folderList(p.PendingClaimOf), p.dropClaimAndForgetCommand())
}

// unboundClaimNotice is PendingNotice for a claim of an id that version
// memory binds to no folder.
func unboundClaimNotice(p *Policy) string {
	return fmt.Sprintf("%s claims the id %s %s; version memory binds %s to no folder (its folder was forgotten with state forget --folder, or an earlier egressd kept it so), so this folder is not that integration until the operator says so, and nothing is allowed for it until then: if %s is %s's folder, %s binds it, once (it then keeps the version floor and the sandbox state egressd kept for %s)",
		p.ManifestAt, p.Manifest.ID, p.Pending, p.Manifest.ID, ManifestPlace(p.ManifestAt), p.Manifest.ID, p.approveManifestCommand(), p.Manifest.ID)
}

func folderList(dirs []string) string {
	if len(dirs) == 1 {
		return "folder " + dirs[0]
	}
	return "folders " + strings.Join(dirs, ", ")
}
