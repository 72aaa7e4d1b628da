package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// stdoutRuns writes n keyed runs to one stream, as serve with audit.path
// "-" does across restarts (the journal keeps them one after another), and
// returns each run's lines. runLink is the state folder's link file, or "".
func stdoutRuns(t *testing.T, n int, runLink string) [][]byte {
	var runs [][]byte
	for i := 0; i < n; i++ {
		var out bytes.Buffer
		l, err := New(&out, Options{Key: testKey, KeyID: "k1", RunLink: runLink})
		if err != nil {
			t.Fatal(err)
		}
		l.Write(Event{Kind: Connect, Decision: "deny", Reason: "ip_literal", HostRaw: "169.254.169.254:443"})
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, out.Bytes())
	}
	return runs
}

func verifyJoined(t *testing.T, runs ...[]byte) Verdict {
	path := filepath.Join(t.TempDir(), "journal.log")
	os.WriteFile(path, bytes.Join(runs, nil), 0o600)
	v, err := Verify([]string{path}, VerifyOptions{Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The attacker's r9: three keyed runs of serve on stdout; without the key,
// the middle run is removed, or the first and last swapped. Each run
// remembers its last hash in the state folder, so the next names it.
func TestKeyedStdoutLogWithARunRemovedOrSwappedIsBroken(t *testing.T) {
	link := filepath.Join(t.TempDir(), "audit-stdout.link")
	runs := stdoutRuns(t, 3, link)
	if v := verifyJoined(t, runs...); !v.Intact || len(v.Notes) != 0 {
		t.Fatalf("three untouched runs: %+v", v)
	}
	if v := verifyJoined(t, runs[0], runs[2]); v.Intact || !strings.Contains(v.Problem, "a run in between was removed") {
		t.Errorf("middle run removed: %+v", v)
	}
	if v := verifyJoined(t, runs[2], runs[1], runs[0]); v.Intact {
		t.Errorf("runs reordered: %+v", v)
	}
	if v := verifyJoined(t, runs[0], runs[1], runs[1], runs[2]); v.Intact {
		t.Errorf("a run replayed: %+v", v)
	}
}

// A link file egressd did not write ("open" and a chain id that is not
// one): the next run's genesis says prev_run=unreadable, and verify does
// not claim that boundary, nor pass it without checkpoints.
func TestRunAfterALinkNotEgressdsIsNotPresentedAsLinked(t *testing.T) {
	link := filepath.Join(t.TempDir(), "audit-stdout.link")
	runs := stdoutRuns(t, 1, link)
	writeRunLink(link, "open crashed")
	runs = append(runs, stdoutRuns(t, 1, link)...)
	if !bytes.Contains(runs[1], []byte("prev_run=unreadable")) {
		t.Fatalf("genesis after a link not egressd's:\n%s", runs[1])
	}
	v := verifyJoined(t, runs...)
	if strings.Contains(v.Proves, "follows the run before it") || v.Intact || !strings.Contains(v.Problem, "may have been removed") {
		t.Errorf("an unlinked boundary is presented as linked: %+v", v)
	}
}

// A keyed stream log written with no link (before this was recorded, or by
// a writer without a state folder) verifies, but the verdict must not claim
// run order: removing a whole run from it cannot be seen.
func TestKeyedStdoutLogWithoutRunLinksDoesNotClaimRunOrder(t *testing.T) {
	runs := stdoutRuns(t, 3, "")
	v := verifyJoined(t, runs[0], runs[2])
	if strings.Contains(v.Proves, "follows the run before it") || strings.Contains(v.Proves, "no line was edited, deleted, reordered or added by anyone") {
		t.Errorf("verify claims run order it did not check: %s", v.Proves)
	}
	if len(v.Notes) == 0 || !strings.Contains(strings.Join(v.Notes, "\n"), "not proven") {
		t.Errorf("verify does not say run order is unproven: %+v", v.Notes)
	}
}

// TestOverlappingRunsLinkTheNextRunToTheLastOneStarted: two runs of one id
// overlap (an MCP host starts a second while the first runs) and the first
// closes last. The next run must name the run the files' start order puts
// before it (the second), not the one that happened to close last, or
// verify of intact files in start order reports a removed run.
func TestOverlappingRunsLinkTheNextRunToTheLastOneStarted(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "id.lastrun")
	open := func() (*Log, *File) {
		f, err := OpenFile(filepath.Join(t.TempDir(), "run.log"), 0)
		if err != nil {
			t.Fatal(err)
		}
		l, err := New(f, Options{RunLink: link})
		if err != nil {
			t.Fatal(err)
		}
		return l, f
	}
	a, fa := open()
	b, fb := open()
	b.Close()
	_, bLast := b.LastHash()
	a.Close()
	fa.Close()
	fb.Close()
	if got, _ := readRunLink(link); got != bLast {
		t.Fatalf("the link names %s, want the last line of the run started last, %s", got, bLast)
	}
}
