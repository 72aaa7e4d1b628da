package audit

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/egressd/egressd/internal/safefile"
	"golang.org/x/sys/unix"
)

// A log written to a stream (stdout, read back from the journal or a
// container log) has no file to find the run before it in. RunLink is a
// small file in the state folder that remembers the hash of the last line
// the previous run wrote, so the next run's genesis names it as prev_run
// just as a run appended to a file does: a run removed, replayed or moved
// between two others then breaks a link only the key could forge.
//
// The file holds one of:
//   - a 64-digit hash: the last line of a run that closed cleanly;
//   - "open CHAIN": a run started and has not closed (it is running, or it
//     crashed), so its last hash is not known.
//
// A missing file means no run wrote with this state folder before
// (prev_run=none); anything else gives prev_run=unreadable (see
// Unreadable). After "open CHAIN"
// the new run's genesis also says prev_open=CHAIN: the run started last
// before it, whose end is not known (it crashed, or still runs). verify
// then requires that run, or the prune receipt that removed it, before
// this one: a crashed run's file deleted by hand breaks that link.
const runLinkMax = 256

// readRunLink returns the prev_run value for a new run, and the chain the
// file says is open ("" when none is).
func readRunLink(path string) (prevRun, open string) {
	defer runLinkRead(path)
	return parseRunLink(path)
}

// parseRunLink reads the link file as readRunLink does, for verify too.
func parseRunLink(path string) (prevRun, open string) {
	data, err := safefile.ReadRegularNoFollow(path, runLinkMax) // the state folder may be the service user's
	if errors.Is(err, fs.ErrNotExist) {
		return "none", ""
	}
	if err != nil {
		return Unreadable, ""
	}
	s := strings.TrimSpace(string(data))
	if id, ok := strings.CutPrefix(s, "open "); ok && isChainID(id) {
		return "unknown", id
	}
	if _, err := hex.DecodeString(s); err != nil || len(s) != 64 {
		return Unreadable, ""
	}
	return s, ""
}

// Unreadable is prev_run when the link file was there but egressd did not
// write what it holds (junk, a link, too long): someone rewrote it, which
// is what removing the last run's file without a trace takes. The genesis
// says so in the keyed chain, and verify fails on it unless checkpoints
// are given (a run removed then has checkpoints matching no chain), rather
// than read it as an old egressd's prev_run=unknown.
const Unreadable = "unreadable"

// isChainID reports whether s is a chain id as New makes them: hex digits.
func isChainID(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && len(s) > 0 && len(s) <= 64
}

// closeRunLink records hash, the last line of chain, as the run the next
// one follows, unless another run started since (the file no longer says
// "open CHAIN"): runs of one id may overlap, and the next run follows the
// one started last, whose own genesis already says prev_run=unknown. A run
// that closes last but started first must not become the next run's
// predecessor, or intact files given in start order read as a removed run.
func closeRunLink(path, chain, hash string) error {
	lock, err := lockRunLink(path)
	if err != nil {
		return err
	}
	defer lock.Close()
	data, err := safefile.ReadRegularNoFollow(path, runLinkMax)
	if err == nil && strings.TrimSpace(string(data)) != "open "+chain {
		return nil
	}
	return writeRunLink(path, hash)
}

// writeRunLink replaces the file's content atomically (a crash leaves the
// old content or the new, never a torn one).
func writeRunLink(path, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".runlink-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(content + "\n"); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// runLinkRead is called after a new run read the link file, before it
// writes it: a test holds a run there while another starts.
var runLinkRead = func(path string) {}

// runLinkBusy is called when a run waits for the link file's lock.
var runLinkBusy = func(path string) {}

// runLinkLockWait bounds the wait for another run of the id to finish its
// read-modify-write of the link file: it takes microseconds, so a lock
// held this long is a stuck or hostile process, and the run refuses to
// start rather than start unlinked.
const runLinkLockWait = 10 * time.Second

// lockRunLink takes the lock that serialises every read-modify-write of
// the link file (PATH.lock beside it; the link file itself is replaced by
// rename, so a lock on it would not last). Two runs of one id starting
// together otherwise both read the file before either wrote "open CHAIN",
// named the same run before them, and their honest files never verified.
// The lock file is opened as OpenPrivate opens (never through a link
// planted in a folder another user may own). Release it with Close.
func lockRunLink(path string) (*os.File, error) {
	f, err := safefile.OpenPrivate(path+".lock", 0)
	if err != nil {
		return nil, fmt.Errorf("the run link's lock: %w", err)
	}
	deadline := time.Now().Add(runLinkLockWait)
	for waited := false; ; waited = true {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("%s.lock: taking its lock: %w", path, err)
		}
		if !waited {
			runLinkBusy(path)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%s.lock: another process has held the lock of the run link for %s (egressd holds it for microseconds): the run is not started unlinked; find the process with fuser %s.lock", path, runLinkLockWait, path)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
