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
	if out.Err.Error() != "network list changed but version 1.0.0 did not; a new list needs a new version" {
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
	if out.Err.Error() != "version 1.9.9 is lower than 2.0.0, seen before; versions only go up" {
		t.Fatalf("err = %v", out.Err)
	}
	f.write("com.acme.erp", "2.0.0", "erp.acme.example", "evil.example")
	out = f.load(f.registry(), Failed)
	if !strings.Contains(out.Err.Error(), "did not; a new list needs a new version") {
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
	if err := mem.Approve("com.acme.erp", "1.1.0"); err != nil {
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

func TestIDChangeAtSamePathIsRefused(t *testing.T) {
	f := newFixture(t)
	r := f.registry()
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(r, Loaded)
	f.write("com.evil.erp", "1.0.0", "evil.example")
	out := f.load(r, KeptLastGood)
	if out.Err.Error() != "id changed from com.acme.erp to com.evil.erp at the same path; an id is immutable" {
		t.Fatalf("err = %v", out.Err)
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

func TestCorruptStateIsNotSilentlyReset(t *testing.T) {
	f := newFixture(t)
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	os.WriteFile(filepath.Join(f.state, stateFile), []byte("{not json"), 0o600)
	out := f.load(f.registry(), Failed)
	if !strings.Contains(out.Err.Error(), "is corrupt") {
		t.Fatalf("err = %v", out.Err)
	}
}
