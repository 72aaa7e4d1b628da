package policy

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestApprovingAWaitingIDChangeBindsNothingOnceAnotherFolderTookTheID is
// round 27's f7b through "egressd approve --folder": the operator was shown
// the id change of a folder to com.acme.fresh, a new id; before the
// approval was made, a hostile folder loaded com.acme.fresh with its own
// list, and the approval bound the folder to that folder's id and list.
// Given what was shown, the approval binds nothing and says version memory
// changed; shown again, it binds.
func TestApprovingAWaitingIDChangeBindsNothingOnceAnotherFolderTookTheID(t *testing.T) {
	f := newFixture(t)
	f.write("com.acme.old", "1.0.0", "api.acme.example")
	f.load(f.registry(), Loaded)
	f.write("com.acme.fresh", "1.0.0", "api.acme.example", "cdn.acme.example")
	f.load(f.registry(), Pending)
	place := ManifestPlace(filepath.Join(f.dir, "manifest.json"))
	approve := func(m *Memory, shown []Approval) ([]Approval, error) {
		return m.ApprovePending("com.acme.fresh", "1.0.0", "", place, shown)
	}
	shown, err := approve(PreviewMemory(f.state), nil)
	if err != nil || len(shown) != 1 || shown[0].Waits {
		t.Fatalf("preview: %+v %v", shown, err)
	}
	_, cfgX := f.second("127.0.0.1:0", "com.acme.fresh", "0.1.0", "api.acme.example", "evil.example")
	loadOne(t, f.registry(), cfgX, Loaded)

	before, err := os.ReadFile(StatePath(f.state))
	if err != nil {
		t.Fatal(err)
	}
	mem, err := OpenMemory(f.state)
	if err != nil {
		t.Fatal(err)
	}
	if made, err := approve(mem, shown); !errors.Is(err, ErrMemoryChanged) {
		t.Fatalf("approved what was not shown: %+v %v", made, err)
	}
	if after, err := os.ReadFile(StatePath(f.state)); err != nil || string(after) != string(before) {
		t.Fatalf("version memory written (%v):\n%s\n%s", err, before, after)
	}
	again, err := approve(PreviewMemory(f.state), nil)
	if err != nil || len(again) != 1 || !again[0].Waits || again[0].InForce.Version != "0.1.0" {
		t.Fatalf("preview after the hostile load does not show 0.1.0's list in force: %+v %v", again, err)
	}
	if made, err := approve(mem, again); err != nil || len(made) != 1 {
		t.Fatalf("approving what was shown: %+v %v", made, err)
	}
}
