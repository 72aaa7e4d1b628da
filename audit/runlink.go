package audit

import (
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/egressd/egressd/internal/safefile"
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
// (prev_run=none); anything else gives prev_run=unknown, which verify
// reports as a boundary whose order it cannot prove. After "open CHAIN"
// the new run's genesis also says prev_open=CHAIN: the run started last
// before it, whose end is not known (it crashed, or still runs). verify
// then requires that run, or the prune receipt that removed it, before
// this one: a crashed run's file deleted by hand breaks that link.
const runLinkMax = 256

// readRunLink returns the prev_run value for a new run, and the chain the
// file says is open ("" when none is).
func readRunLink(path string) (prevRun, open string) {
	data, err := safefile.ReadRegularNoFollow(path, runLinkMax) // the state folder may be the service user's
	if errors.Is(err, fs.ErrNotExist) {
		return "none", ""
	}
	if err != nil {
		return "unknown", ""
	}
	s := strings.TrimSpace(string(data))
	if id, ok := strings.CutPrefix(s, "open "); ok && isChainID(id) {
		return "unknown", id
	}
	if _, err := hex.DecodeString(s); err != nil || len(s) != 64 {
		return "unknown", ""
	}
	return s, ""
}

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
