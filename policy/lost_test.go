package policy

import (
	"strings"
	"testing"
)

// TestAReadThatBindsAFolderToWhatOnlyWaitedThereIsRefused is round 51's
// restore_pending finding, for a folder bound to an id and for one with
// only a claim waiting: a running process that last saw a change or a
// claim waiting at a folder takes a read that binds the folder to the
// waiting id only when that id's record holds the version and list that
// waited (another process loaded the approved change); an older copy
// restored, binding it "by approval" to an older list of that id, or
// binding it without approval, is refused.
func TestAReadThatBindsAFolderToWhatOnlyWaitedThereIsRefused(t *testing.T) {
	digest := func(hex string) string { return "sha256:" + strings.Repeat(hex, 64) }
	waiting := &IDChange{ID: "com.b", Version: "2.0.0", Digest: digest("1")}
	record := func(version, digest string) Record {
		return Record{Version: version, Digest: digest, Approved: Approved{Version: version, Digest: digest, Entries: []string{}}}
	}
	for _, c := range []struct {
		name     string
		was      Folder
		now      Folder
		b        Record
		wantLost string
	}{
		{"the approved change, loaded", Folder{ID: "com.a", Pending: waiting}, Folder{ID: "com.b", ByApproval: true}, record("2.0.0", digest("1")), ""},
		{"an older list of the id that waited", Folder{ID: "com.a", Pending: waiting}, Folder{ID: "com.b", ByApproval: true}, record("1.0.0", digest("2")), "no longer binds /x to com.a"},
		{"the version that waited with another list", Folder{ID: "com.a", Pending: waiting}, Folder{ID: "com.b", ByApproval: true}, record("2.0.0", digest("3")), "no longer binds /x to com.a"},
		{"not by approval", Folder{ID: "com.a", Pending: waiting}, Folder{ID: "com.b"}, record("2.0.0", digest("1")), "no longer binds /x to com.a"},
		{"a claim, approved and loaded", Folder{Pending: waiting}, Folder{ID: "com.b", ByApproval: true}, record("2.0.0", digest("1")), ""},
		{"a claim, bound to an older list", Folder{Pending: waiting}, Folder{ID: "com.b", ByApproval: true}, record("1.0.0", digest("2")), "binds /x to com.b, which only waited there"},
		{"a claim, bound without approval", Folder{Pending: waiting}, Folder{ID: "com.b"}, record("2.0.0", digest("1")), "binds /x to com.b, which only waited there"},
		{"a claim dropped", Folder{Pending: waiting}, Folder{}, record("1.0.0", digest("2")), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := InMemory()
			last := State{IDs: map[string]Record{"com.a": record("1.0.0", digest("a"))}, Folders: map[string]Folder{"/x": c.was}}
			m.remember(last)
			now := State{IDs: map[string]Record{"com.a": record("1.0.0", digest("a")), "com.b": c.b}, Folders: map[string]Folder{"/x": c.now}}
			got := m.lost(now, false)
			if (c.wantLost == "") != (got == "") || !strings.Contains(got, c.wantLost) {
				t.Fatalf("lost: %q, want %q", got, c.wantLost)
			}
		})
	}
}

// TestAMoveByApprovalWrittenOverWhatThisProcessSawIsTaken is round 56's
// f2: the operator approved a folder's id change and another process
// loaded it within KeepUp's second, so serve never read the change while
// it waited, and took the moved binding for a lost one: it refused every
// reload. A file written over what serve saw (its lineage says so) is
// egressd's own writes; a move by approval there is taken, and one not
// by approval still is not.
func TestAMoveByApprovalWrittenOverWhatThisProcessSawIsTaken(t *testing.T) {
	digest := "sha256:" + strings.Repeat("1", 64)
	rec := Record{Version: "1.0.0", Digest: digest, Approved: Approved{Version: "1.0.0", Digest: digest, Entries: []string{}}}
	m := InMemory()
	m.remember(State{IDs: map[string]Record{"com.a": rec}, Folders: map[string]Folder{"/x": {ID: "com.a"}}})
	moved := State{IDs: map[string]Record{"com.a": rec, "com.b": rec}, Folders: map[string]Folder{"/x": {ID: "com.b", ByApproval: true}}}
	if got := m.lost(moved, true); got != "" {
		t.Errorf("an approved move written over what this process saw: %q", got)
	}
	if got := m.lost(moved, false); got == "" {
		t.Error("an approved move this process cannot place was taken")
	}
	moved.Folders["/x"] = Folder{ID: "com.b"}
	if got := m.lost(moved, true); got == "" {
		t.Error("a move not by approval was taken")
	}
}
