package audit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// startOwnRun starts a keyed run in a new file of its own in dir, linked through
// link, as egressd run does (STATE/audit/ID.PID.log and ID.lastrun).
func startOwnRun(t *testing.T, dir, name, link string) (*Log, string, error) {
	t.Helper()
	path := filepath.Join(dir, name+".log")
	f, err := CreateFile(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	l, err := New(f, Options{Key: testKey, KeyID: "k1", RunLink: link})
	return l, path, err
}

func verifyFilesWithKey(t *testing.T, files ...string) Verdict {
	t.Helper()
	v, err := Verify(files, VerifyOptions{Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTwoRunsOfOneIDStartingTogetherAreLinkedInStartOrder is round 18's
// t7: two egressd run of one id started together both read the link file
// before either wrote "open CHAIN", so both geneses named the same
// prev_run. The honest files then never verified, in either order, and
// deleting one of the two left a log that verified intact. Run A is held
// between its read of the link file and its write while run B starts: B
// must wait for A's lock, and then name A as the run open before it.
func TestTwoRunsOfOneIDStartingTogetherAreLinkedInStartOrder(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "com.x.lastrun")
	p, pFile, err := startOwnRun(t, dir, "p", link)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()

	aRead, release := make(chan struct{}), make(chan struct{})
	bRead, bBusy := make(chan struct{}, 1), make(chan struct{}, 1)
	var reads atomic.Int32
	runLinkRead = func(string) {
		if reads.Add(1) == 1 {
			close(aRead)
			<-release
			return
		}
		select {
		case bRead <- struct{}{}:
		default:
		}
	}
	runLinkBusy = func(string) {
		select {
		case bBusy <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() { runLinkRead, runLinkBusy = func(string) {}, func(string) {} })

	type started struct {
		l    *Log
		path string
		err  error
	}
	startIn := func(name string, out chan<- started) {
		l, path, err := startOwnRun(t, dir, name, link)
		out <- started{l, path, err}
	}
	aDone, bDone := make(chan started, 1), make(chan started, 1)
	go startIn("a", aDone)
	<-aRead
	go startIn("b", bDone)
	select {
	case <-bBusy:
	case <-bRead:
		t.Error("run B read the link file while run A was between its read and its write")
	}
	close(release)
	a, b := <-aDone, <-bDone
	if a.err != nil || b.err != nil {
		t.Fatalf("starting: %v, %v", a.err, b.err)
	}
	a.l.Close()
	b.l.Close()
	d, dFile, err := startOwnRun(t, dir, "d", link)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()

	if v := verifyFilesWithKey(t, pFile, a.path, b.path, dFile); !v.Intact {
		t.Fatalf("the honest files in start order: %s", v.Problem)
	}
	if v := verifyFilesWithKey(t, pFile, b.path, dFile); v.Intact {
		t.Errorf("run A's file deleted: verified intact")
	}
	if v := verifyFilesWithKey(t, pFile, a.path, dFile); v.Intact {
		t.Errorf("run B's file deleted: verified intact")
	}
	if data, _ := os.ReadFile(b.path); !strings.Contains(string(data), "prev_open=") {
		t.Errorf("run B's genesis does not name run A as open: %s", data)
	}
	// The README's recipe orders the files by their genesis times: the
	// lock is held until the genesis is written, so they follow the links.
	if ta, tb := genesisTime(t, a.path), genesisTime(t, b.path); !ta.Before(tb) {
		t.Errorf("run A's genesis time %s is not before run B's %s", ta, tb)
	}
}

func genesisTime(t *testing.T, path string) time.Time {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var first struct {
		Time time.Time `json:"time"`
	}
	line, _, _ := strings.Cut(string(data), "\n")
	if err := json.Unmarshal([]byte(line), &first); err != nil {
		t.Fatal(err)
	}
	return first.Time
}
