package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/egressd/egressd/policy"
)

// TestAnApprovedIDChangeToAFreshIDWaitsAgainOnceAnotherFolderTookTheID is
// round 30's s4.sh on the real binary: folder a (com.x) changes its id to
// com.y 5.0.0, an id nobody held, and the operator approves it (the
// preview names no other holder). Before a loads again, folder q first
// loads com.y 1.0.0. a's load applied the approval anyway: a joined
// com.y under q's list (q.example, never shown for a) and raised com.y's
// floor to 5.0.0, locking q out. An approval holds only for the state it
// was shown against: a's change now waits again, says why, state list
// says the same, and q keeps its own list and loads again.
func TestAnApprovedIDChangeToAFreshIDWaitsAgainOnceAnotherFolderTookTheID(t *testing.T) {
	state, a, q := t.TempDir(), t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, a, "com.x", "1.0.0", "x.example"))
	if o := loadAsServe(t, state, erpFolder(t, a, "com.y", "5.0.0", "y.example")); o.Result != policy.Pending {
		t.Fatalf("a's id change does not wait: %+v", o)
	}
	cmd := regexp.MustCompile(`egressd approve --state \S+ --folder \S+ --digest \S+ com\.y 5\.0\.0`).FindString(stateList(t, state))
	if cmd == "" {
		t.Fatalf("state list prints no command for a's change")
	}
	if out, errs, code := runBinary(t, append(strings.Fields(cmd)[1:], "--yes")...); code != exitOK {
		t.Fatalf("approve: exit %d\n%s%s", code, out, errs)
	}
	if o := loadAsServe(t, state, erpFolder(t, q, "com.y", "1.0.0", "q.example")); o.Result != policy.Loaded {
		t.Fatalf("q's first load of com.y: %+v", o)
	}
	const why = "changed since the approval"
	if list := stateList(t, state); !strings.Contains(list, why) {
		t.Errorf("state list does not say a's approval no longer holds:\n%s", list)
	}
	o := loadAsServe(t, state, a)
	if o.Result != policy.Pending || !strings.Contains(o.Notice, why) || !strings.Contains(o.Notice, "egressd approve --state") {
		t.Fatalf("a's approved change applied against a state the operator was never shown: %+v", o)
	}
	if o := loadAsServe(t, state, q); o.Result != policy.Loaded || o.Version != "1.0.0" {
		t.Fatalf("q is locked out of its own id: %+v", o)
	}
	a = policy.ManifestPlace(filepath.Join(a, "manifest.json"))
	if list := stateList(t, state); !strings.Contains(list, "folder "+a) && !strings.Contains(list, a) {
		t.Errorf("state list lost a's waiting change:\n%s", list)
	}
}

// TestServeStartsWhenAFolderAddedBeforeARenamedOneTakesTheIDItMovesTo is
// round 30's s4b.sh: a's change to com.y is approved; q, a new folder
// declaring com.y, is added to the same serve config before a. Serve
// could not start ("id com.y is already served from q; ids must be
// unique"), and every restart failed the same way. a is not bound to
// com.y: its change waits again with nothing allowed, and serve starts.
func TestServeStartsWhenAFolderAddedBeforeARenamedOneTakesTheIDItMovesTo(t *testing.T) {
	state, a, q := t.TempDir(), t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, a, "com.x", "1.0.0", "x.example"))
	loadAsServe(t, state, erpFolder(t, a, "com.y", "5.0.0", "y.example"))
	cmd := regexp.MustCompile(`egressd approve --state \S+ --folder \S+ --digest \S+ com\.y 5\.0\.0`).FindString(stateList(t, state))
	if out, errs, code := runBinary(t, append(strings.Fields(cmd)[1:], "--yes")...); cmd == "" || code != exitOK {
		t.Fatalf("approve %q: exit %d\n%s%s", cmd, code, out, errs)
	}
	erpFolder(t, q, "com.y", "1.0.0", "q.example")
	mem, err := policy.OpenMemory(state)
	if err != nil {
		t.Fatal(err)
	}
	cfg := policy.DefaultConfig()
	cfg.Integrations = []policy.Integration{{Manifest: q, Listen: "127.0.0.1:0"}, {Manifest: a, Listen: "127.0.0.1:0"}}
	r := policy.NewRegistry(mem, nil)
	outs := r.Load(cfg)
	if outs[0].Result != policy.Loaded || outs[1].Result != policy.Pending {
		t.Fatalf("serve cannot start: %+v", outs)
	}
	if d := r.Policy(a).Decide("q.example", 443); d.Verdict == policy.Allow {
		t.Fatalf("a may reach q's list while its change waits: %+v", d)
	}
}

// TestServeStartsWhenAnApprovedIDChangeTakesTheIDAnotherEntryServes is
// round 51's shared_rename.sh: f's change to com.b, the id folder g holds,
// was approved (egressd approve shows that f then shares com.b with g).
// One serve serves an id from one entry: a config holding both refused
// to start, g's service with it, when f came first, and in either order
// once another process (egressd run) had loaded f's approved change. g is
// served, in every case, and f alone is refused with what to do.
func TestServeStartsWhenAnApprovedIDChangeTakesTheIDAnotherEntryServes(t *testing.T) {
	for _, c := range []struct{ fFirst, loadedElsewhere bool }{{true, false}, {false, false}, {true, true}, {false, true}} {
		fFirst := c.fFirst
		state, f, g := t.TempDir(), t.TempDir(), t.TempDir()
		loadAsServe(t, state, erpFolder(t, g, "com.b", "1.0.0", "g.example"))
		loadAsServe(t, state, erpFolder(t, f, "com.a", "1.0.0", "f.example"))
		loadAsServe(t, state, erpFolder(t, f, "com.b", "1.0.0", "g.example"))
		cmd := regexp.MustCompile(`egressd approve --state \S+ --folder \S+ --digest \S+ com\.b 1\.0\.0`).FindString(stateList(t, state))
		out, errs, code := runBinary(t, append(strings.Fields(cmd)[1:], "--yes")...)
		if cmd == "" || code != exitOK {
			t.Fatalf("approve %q: exit %d\n%s%s", cmd, code, out, errs)
		}
		if !strings.Contains(out, "one serve serves an id from one entry") {
			t.Errorf("approve does not say that one serve cannot serve both folders:\n%s", out)
		}
		if c.loadedElsewhere {
			if o := loadAsServe(t, state, f); o.Result != policy.Loaded {
				t.Fatalf("the other process's load of f: %+v", o)
			}
		}
		mem, err := policy.OpenMemory(state)
		if err != nil {
			t.Fatal(err)
		}
		cfg := policy.DefaultConfig()
		cfg.Integrations = []policy.Integration{{Manifest: g, Listen: "127.0.0.1:0"}, {Manifest: f, Listen: "127.0.0.1:0"}}
		if fFirst {
			cfg.Integrations[0], cfg.Integrations[1] = cfg.Integrations[1], cfg.Integrations[0]
		}
		r := policy.NewRegistry(mem, nil)
		for _, o := range r.Load(cfg) {
			if o.StopsStart(cfg) {
				t.Fatalf("%+v: serve cannot start: %+v", c, o)
			}
			if o.Key == f && (o.Result != policy.Failed || !strings.Contains(o.Err.Error(), "one serve serves an id from one entry")) {
				t.Errorf("%+v: f's outcome %+v", c, o)
			}
		}
		if d := r.Policy(g).Decide("g.example", 443); d.Verdict != policy.Allow {
			t.Fatalf("%+v: g is not served: %+v", c, d)
		}
		if p := r.Policy(f); p != nil {
			t.Fatalf("%+v: f is served: %+v", c, p)
		}
	}
}
