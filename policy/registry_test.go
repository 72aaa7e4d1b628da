package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type fixture struct {
	t     *testing.T
	dir   string
	state string
	cfg   Config
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, dir: t.TempDir(), state: t.TempDir(), cfg: DefaultConfig()}
	f.cfg.Integrations = []Integration{{Manifest: f.dir, Listen: "127.0.0.1:0"}}
	return f
}

func (f *fixture) write(id, version string, hosts ...string) {
	f.t.Helper()
	doc := `{"manifest_version":1,"id":"` + id + `","version":"` + version + `","network":{"connect":["` + strings.Join(hosts, `","`) + `"]}}`
	if len(hosts) == 0 {
		doc = `{"manifest_version":1,"id":"` + id + `","version":"` + version + `","network":{"connect":[]}}`
	}
	if err := os.WriteFile(filepath.Join(f.dir, "manifest.json"), []byte(doc), 0o600); err != nil {
		f.t.Fatal(err)
	}
}

// registry opens a registry on the fixture's state directory, as a fresh
// egressd process would.
func (f *fixture) registry() *Registry {
	f.t.Helper()
	mem, err := OpenMemory(f.state)
	if err != nil {
		f.t.Fatal(err)
	}
	return NewRegistry(mem, nil)
}

func (f *fixture) load(r *Registry, want Result) Outcome {
	f.t.Helper()
	outs := r.Load(f.cfg)
	if len(outs) != 1 || outs[0].Result != want {
		f.t.Fatalf("Load = %+v, want result %s", outs, want)
	}
	return outs[0]
}

func (f *fixture) allows(r *Registry, host string) bool {
	return r.Policy(f.dir).Decide(host, 443).Verdict.Permits()
}

func TestReloadInvalidManifestKeepsLastGood(t *testing.T) {
	f := newFixture(t)
	r := f.registry()
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(r, Loaded)
	f.write("com.acme.erp", "1.1.0", "10.0.0.1")
	out := f.load(r, KeptLastGood)
	if !strings.Contains(out.Err.Error(), `network.connect[0]: bare IP addresses are not allowed ("10.0.0.1")`) {
		t.Fatalf("err = %v", out.Err)
	}
	if !f.allows(r, "erp.acme.example") {
		t.Fatal("last good policy not in force")
	}
	if r.Snapshot().Generation != 2 {
		t.Fatalf("generation %d", r.Snapshot().Generation)
	}
}

func TestReloadMissingOrPartialManifestKeepsLastGood(t *testing.T) {
	f := newFixture(t)
	r := f.registry()
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(r, Loaded)
	os.WriteFile(filepath.Join(f.dir, "manifest.json"), []byte(`{"manifest_version":1,"id":"com.acme.erp","vers`), 0o600)
	f.load(r, KeptLastGood)
	os.Remove(filepath.Join(f.dir, "manifest.json"))
	f.load(r, KeptLastGood)
	if !f.allows(r, "erp.acme.example") {
		t.Fatal("last good policy not in force")
	}
}

func TestFirstLoadOfInvalidManifestFails(t *testing.T) {
	f := newFixture(t)
	r := f.registry()
	f.write("com.acme.erp", "1.0.0", "*")
	f.load(r, Failed)
	if r.Policy(f.dir) != nil {
		t.Fatal("a failed manifest has a policy")
	}
}

func TestSameVersionWithChangedListIsRefused(t *testing.T) {
	f := newFixture(t)
	r := f.registry()
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(r, Loaded)
	f.write("com.acme.erp", "1.0.0", "erp.acme.example", "evil.example")
	out := f.load(r, KeptLastGood)
	if !strings.HasPrefix(out.Err.Error(), "network list changed but version 1.0.0 did not; a new list needs a version above 1.0.0") {
		t.Fatalf("err = %v", out.Err)
	}
	if f.allows(r, "evil.example") {
		t.Fatal("unversioned widening applied")
	}
}

func TestLowerVersionIsRefusedAcrossRestart(t *testing.T) {
	f := newFixture(t)
	f.write("com.acme.erp", "2.0.0", "erp.acme.example")
	f.load(f.registry(), Loaded)

	// A restart: a new process, a new registry, the same state directory.
	f.write("com.acme.erp", "1.9.9", "erp.acme.example", "evil.example")
	out := f.load(f.registry(), Failed)
	// The message names the state file and the way out (issue 13.3).
	want := "version 1.9.9 is lower than 2.0.0, seen before; versions only go up: give a version above 2.0.0, or, if com.acme.erp 1.9.9 must come back, forget the id deliberately (egressd state --state " + f.state + " forget com.acme.erp) (version memory: " + filepath.Join(f.state, "versions.json") + ")"
	if out.Err.Error() != want {
		t.Fatalf("err = %v", out.Err)
	}
	f.write("com.acme.erp", "2.0.0", "erp.acme.example", "evil.example")
	out = f.load(f.registry(), Failed)
	if !strings.Contains(out.Err.Error(), "did not; a new list needs a version above") {
		t.Fatalf("err = %v", out.Err)
	}
}

func TestNarrowingAppliesAtOnce(t *testing.T) {
	f := newFixture(t)
	r := f.registry()
	f.write("com.acme.erp", "1.0.0", "erp.acme.example", "old.acme.example")
	f.load(r, Loaded)
	f.write("com.acme.erp", "1.1.0", "erp.acme.example")
	f.load(r, Loaded)
	if f.allows(r, "old.acme.example") || !f.allows(r, "erp.acme.example") {
		t.Fatal("narrowing did not apply")
	}
}

func TestWideningWaitsForApprovalAcrossRestart(t *testing.T) {
	f := newFixture(t)
	r := f.registry()
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(r, Loaded)
	f.write("com.acme.erp", "1.1.0", "erp.acme.example", "new.acme.example")
	out := f.load(r, Pending)
	if out.Pending != "1.1.0" || f.allows(r, "new.acme.example") || !f.allows(r, "erp.acme.example") {
		t.Fatalf("widening applied before approval: %+v", out)
	}

	// Still pending after a restart: the approved list is remembered.
	r = f.registry()
	f.load(r, Pending)
	if f.allows(r, "new.acme.example") {
		t.Fatal("widening applied after restart without approval")
	}

	mem, _ := OpenMemory(f.state)
	if _, err := mem.ApprovePending("com.acme.erp", "1.1.0", "", "", nil); err != nil {
		t.Fatal(err)
	}
	f.load(r, Loaded)
	if !f.allows(r, "new.acme.example") {
		t.Fatal("approved widening did not apply")
	}
}

func TestWideningGatePinnedDigestAndAuto(t *testing.T) {
	f := newFixture(t)
	r := f.registry()
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(r, Loaded)
	f.write("com.acme.erp", "1.1.0", "erp.acme.example", "new.acme.example")
	f.cfg.Integrations[0].PinDigest = "sha256:0000"
	f.load(r, Pending)
	f.cfg.Integrations[0].PinDigest = r.Policy(f.dir).Manifest.Digest()
	f.load(r, Loaded)

	f.cfg.Integrations[0].PinDigest = ""
	f.cfg.Integrations[0].Widen = WidenAuto
	f.write("com.acme.erp", "1.2.0", "erp.acme.example", "new.acme.example", "newer.acme.example")
	f.load(r, Loaded)
	if !f.allows(r, "newer.acme.example") {
		t.Fatal("widen: auto did not apply")
	}
}

// TestIDChangeInAKnownFolderWaitsForApprovalAcrossRestarts is issue 13.1:
// a new id in a folder bound to another is not a fresh start, neither in
// the process that saw the old id nor in a new one.
func TestIDChangeInAKnownFolderWaitsForApprovalAcrossRestarts(t *testing.T) {
	f := newFixture(t)
	r := f.registry()
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(r, Loaded)
	f.write("com.acme.erp", "1.1.0", "erp.acme.example", "evil.example")
	f.load(r, Pending)
	f.write("com.acme.erp2", "1.0.0", "erp.acme.example", "evil.example")
	for _, r := range []*Registry{r, f.registry(), f.registry()} {
		out := f.load(r, Pending)
		if f.allows(r, "evil.example") || !f.allows(r, "erp.acme.example") || !strings.Contains(out.Notice, "egressd approve --state "+f.state+" --folder "+f.dir+" --digest sha256:") || !strings.Contains(out.Notice, " com.acme.erp2 1.0.0)") {
			t.Fatalf("id change applied without approval: %+v", out)
		}
		if d := r.Policy(f.dir).Decide("evil.example", 443); d.Reason != PendingApproval || !strings.Contains(Sentence(d, r.Policy(f.dir)), "egressd approve --state "+f.state+" --folder "+f.dir+" --digest sha256:") {
			t.Fatalf("reason %s: %s", d.Reason, Sentence(d, r.Policy(f.dir)))
		}
	}
	mem, _ := OpenMemory(f.state)
	if a, err := mem.ApprovePending("com.acme.erp2", "1.0.0", "", ManifestPlace(filepath.Join(f.dir, "manifest.json")), nil); err != nil || len(a) != 1 || !strings.Contains(a[0].What, "id change") {
		t.Fatalf("%+v %v", a, err)
	}
	for _, r := range []*Registry{f.registry(), f.registry()} {
		f.load(r, Loaded)
		if !f.allows(r, "evil.example") {
			t.Fatal("approved id change did not apply")
		}
	}
}

// TestApprovalIsBoundToTheListSeen is issue 18.7: approving a version binds
// the list egressd saw at it, not any list at that version; a version not
// seen, or an id never seen, is refused.
func TestApprovalIsBoundToTheListSeen(t *testing.T) {
	f := newFixture(t)
	r := f.registry()
	mem, _ := OpenMemory(f.state)
	if _, err := mem.ApprovePending("com.acme.erp", "1.1.0", "", "", nil); err == nil || !strings.Contains(err.Error(), "not in version memory") {
		t.Fatalf("unknown id approved: %v", err)
	}
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(r, Loaded)
	if _, err := mem.ApprovePending("com.acme.erp", "1.1.0", "", "", nil); err == nil || !strings.Contains(err.Error(), "has not seen com.acme.erp 1.1.0") {
		t.Fatalf("unseen version approved: %v", err)
	}
	f.write("com.acme.erp", "1.1.0", "erp.acme.example", "new.acme.example")
	f.load(r, Pending)
	a, err := mem.ApprovePending("com.acme.erp", "1.1.0", "", "", nil)
	if err != nil || len(a) != 1 || a[0].Digest != r.Policy(f.dir).Manifest.Digest() {
		t.Fatalf("%+v %v", a, err)
	}
	// Another list at the approved version is not what was approved.
	f.write("com.acme.erp", "1.1.0", "erp.acme.example", "evil.example")
	f.load(r, KeptLastGood)
	if f.allows(r, "evil.example") {
		t.Fatal("approval applied to another list")
	}
}

func TestDuplicateIDsAreRefused(t *testing.T) {
	f := newFixture(t)
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	other := t.TempDir()
	data, _ := os.ReadFile(filepath.Join(f.dir, "manifest.json"))
	os.WriteFile(filepath.Join(other, "manifest.json"), data, 0o600)
	f.cfg.Integrations = append(f.cfg.Integrations, Integration{Manifest: other, Listen: "127.0.0.1:0"})
	outs := f.registry().Load(f.cfg)
	if outs[0].Result != Loaded || outs[1].Result != Failed || !strings.Contains(outs[1].Err.Error(), "ids must be unique") {
		t.Fatalf("outcomes %+v", outs)
	}
}

func TestRemovalOnlyWhenOperatorRemoves(t *testing.T) {
	f := newFixture(t)
	r := f.registry()
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(r, Loaded)
	f.cfg.Integrations = nil
	outs := r.Load(f.cfg)
	if len(outs) != 1 || outs[0].Result != Removed || r.Policy(f.dir) != nil {
		t.Fatalf("outcomes %+v", outs)
	}
}

// TestCorruptStateIsNotSilentlyReset includes issue 18.8: a state file of
// null (and every other shape egressd does not write) fails closed with a
// message naming the file, never a panic.
func TestCorruptStateIsNotSilentlyReset(t *testing.T) {
	for _, doc := range []string{"{not json", "null", "", "[]", "1", `{"com.acme.erp":null}`, `{"com.acme.erp":{"version":"1.0.0"}}`,
		`{"egressd_state":2,"ids":null,"folders":{}}`, `{"egressd_state":2,"ids":{},"folders":{"/x":null}}`, `{"egressd_state":3,"ids":{},"folders":{}}`} {
		f := newFixture(t)
		f.write("com.acme.erp", "1.0.0", "erp.acme.example")
		os.WriteFile(filepath.Join(f.state, stateFile), []byte(doc), 0o600)
		out := f.load(f.registry(), Failed)
		if !strings.Contains(out.Err.Error(), "is corrupt") || !strings.Contains(out.Err.Error(), filepath.Join(f.state, stateFile)) {
			t.Fatalf("%s: err = %v", doc, out.Err)
		}
	}
}

// FuzzStateDecode: no state file makes the decoder panic, and whatever it
// accepts survives its own encoding unchanged.
func FuzzStateDecode(f *testing.F) {
	f.Add([]byte(`{"egressd_state":2,"ids":{"com.acme.erp":{"version":"1.1.0","digest":"sha256:` + strings.Repeat("a", 64) + `","approved":{"version":"1.0.0","digest":"sha256:` + strings.Repeat("b", 64) + `","entries":["erp.acme.example"]},"approvals":{"1.1.0":"sha256:` + strings.Repeat("a", 64) + `"}}},"folders":{"/srv/erp":{"id":"com.acme.erp","pending":{"id":"com.acme.erp2","version":"1.0.0","digest":"sha256:` + strings.Repeat("c", 64) + `"}}}}`))
	f.Add([]byte(`{"com.acme.erp":{"version":"1.0.0","digest":"sha256:` + strings.Repeat("a", 64) + `","approved":{"version":"1.0.0","digest":"sha256:` + strings.Repeat("a", 64) + `","entries":[]},"approvals":{"2.0.0":""}}}`))
	f.Add([]byte("null"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeState(data)
		if err != nil {
			return
		}
		again, err := DecodeState(s.encode())
		if err != nil || string(again.encode()) != string(s.encode()) {
			t.Fatalf("accepted state does not survive its encoding: %v", err)
		}
	})
}

// TestFirstLayoutStateStillReads: a versions.json written before folders
// were remembered still holds its versions; an approval it holds that was
// bound to no list is honoured for none. It binds the id to no folder, so
// the first load waits until the operator names the id's folder
// (TestLegacyIDIsNotHandedToTheFirstFolderThatLoadsIt).
func TestFirstLayoutStateStillReads(t *testing.T) {
	f := newFixture(t)
	f.write("com.acme.erp", "1.1.0", "erp.acme.example", "new.acme.example")
	d := "sha256:" + strings.Repeat("0", 64)
	os.WriteFile(filepath.Join(f.state, stateFile), []byte(`{"com.acme.erp":{"version":"1.0.0","digest":"`+d+`","approved":{"version":"1.0.0","digest":"`+d+`","entries":["erp.acme.example"]},"approvals":{"1.1.0":""}}}`), 0o600)
	r := f.registry()
	f.load(r, Pending) // the claim of an id bound to no folder
	mem, _ := OpenMemory(f.state)
	if _, err := mem.ApproveManifest(r.Policy(f.dir).Manifest, ManifestPlace(filepath.Join(f.dir, "manifest.json")), false, nil); err != nil {
		t.Fatal(err)
	}
	if out := f.load(r, Pending); out.Notice == "" || !strings.Contains(out.Notice, "adds new.acme.example") { // the widening
		t.Fatalf("after the folder's approval: %+v", out)
	}
	f.write("com.acme.erp", "0.9.0", "erp.acme.example")
	if out := f.load(r, KeptLastGood); !strings.Contains(out.Err.Error(), "is lower than 1.1.0") {
		t.Fatalf("err = %v", out.Err)
	}
}

// TestNewFolderWithAnotherIDOnARecycledListenerIsItsOwnIntegration is
// issue 17's fifth attacker: a folder with a never-seen id, served on the
// listener another integration used before, is its own first load. It is
// not a rename of the listener's previous occupant: that id's list is not
// put in force for it, and nothing it loads is recorded as that id's.
func TestNewFolderWithAnotherIDOnARecycledListenerIsItsOwnIntegration(t *testing.T) {
	f := newFixture(t)
	f.cfg.Integrations[0].Listen = "unix:/run/egressd/erp.sock"
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(f.registry(), Loaded)

	f.dir = t.TempDir() // another integration, given the freed socket path
	f.cfg.Integrations[0].Manifest = f.dir
	f.write("com.other.tool", "1.0.0", "tool.other.example")
	r := f.registry()
	out := f.load(r, Loaded)
	if id, _ := r.Policy(f.dir).InForce(); id != "com.other.tool" || out.Pending != "" {
		t.Fatalf("the newcomer runs as %s: %+v", id, out)
	}
	if f.allows(r, "erp.acme.example") || !f.allows(r, "tool.other.example") {
		t.Fatal("the listener's previous occupant's list is in force for the newcomer")
	}
	mem, _ := OpenMemory(f.state)
	s, _ := mem.Read()
	if got := s.FoldersOf("com.acme.erp"); len(got) != 1 || s.IDs["com.acme.erp"].Pending != nil {
		t.Fatalf("the newcomer's load touched com.acme.erp's record: %v %+v", got, s.IDs["com.acme.erp"])
	}
}

// TestReloadDuplicateBeforeTheServedEntryIsTheOneRefused: on reload, an
// entry that claims a served id from another spelling of the path is the
// duplicate, even listed first, and its exemptions apply nowhere.
func TestReloadDuplicateBeforeTheServedEntryIsTheOneRefused(t *testing.T) {
	f := newFixture(t)
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	r := f.registry()
	f.load(r, Loaded)
	served := f.cfg.Integrations[0]
	dup := Integration{Manifest: filepath.Join(f.dir, "manifest.json"), Listen: "unix:/run/dup.sock", Exemptions: Exemptions{Mode: Audit}}
	f.cfg.Integrations = []Integration{dup, served}
	outs := r.Load(f.cfg)
	if outs[0].Result != Failed || outs[1].Result != Unchanged || r.Policy(dup.Manifest) != nil || r.Policy(f.dir).Exemptions.Mode == Audit {
		t.Fatalf("outcomes %+v", outs)
	}
	// The same key twice: the entry on the listener that served it wins.
	f.cfg.Integrations = []Integration{{Manifest: f.dir, Listen: "unix:/run/dup.sock", Exemptions: Exemptions{Mode: Audit}}, served}
	outs = r.Load(f.cfg)
	if outs[0].Result != Failed || !strings.Contains(outs[0].Err.Error(), "already served on 127.0.0.1:0") || r.Policy(f.dir).Exemptions.Mode == Audit {
		t.Fatalf("outcomes %+v", outs)
	}
}

// TestTheIDInForceDuringAWaitingRenameIsServedOnce: folder A renamed
// com.acme.erp to com.acme.new and waits, so com.acme.erp is still in
// force there; a second entry carrying com.acme.erp, listed first, must
// not be served beside it under the same id.
func TestTheIDInForceDuringAWaitingRenameIsServedOnce(t *testing.T) {
	f := newFixture(t)
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(f.registry(), Loaded)
	f.write("com.acme.new", "1.0.0", "erp.acme.example")
	dirB, cfgB := f.second("127.0.0.1:0", "com.acme.erp", "1.0.0", "erp.acme.example")
	cfg := f.cfg
	cfg.Integrations = append(cfgB.Integrations, f.cfg.Integrations...)
	r := f.registry()
	served := map[string]int{}
	for _, o := range r.Load(cfg) {
		if o.Result != Failed {
			served[o.ID]++
		}
	}
	for _, key := range []string{dirB, f.dir} {
		if p := r.Policy(key); p != nil {
			if id, holds := holdsID(p); holds { // a pending claim allows nothing under it
				served[id+" in force"]++
			}
		}
	}
	if served["com.acme.erp in force"] > 1 {
		t.Fatalf("com.acme.erp is in force on two entries: %v", served)
	}
}

// TestStartWithASecondEntryDeclaringABoundIDMakesItAClaim: at start (no
// last good policy), an entry whose manifest declares an id version memory
// binds to another entry's folder waits with nothing allowed, and the
// others load; a first start, where memory binds the id to neither, is
// still refused (TestDuplicateIDsAreRefused).
func TestStartWithASecondEntryDeclaringABoundIDMakesItAClaim(t *testing.T) {
	f := newFixture(t)
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(f.registry(), Loaded)
	other := t.TempDir()
	data, _ := os.ReadFile(filepath.Join(f.dir, "manifest.json"))
	os.WriteFile(filepath.Join(other, "manifest.json"), data, 0o600)
	f.cfg.Integrations = append([]Integration{{Manifest: other, Listen: "127.0.0.1:0"}}, f.cfg.Integrations...)
	r := f.registry()
	outs := r.Load(f.cfg)
	if outs[0].Result != Pending || outs[1].Result != Loaded || r.Policy(other).Decide("erp.acme.example", 443).Verdict.Permits() {
		t.Fatalf("outcomes %+v", outs)
	}
}
