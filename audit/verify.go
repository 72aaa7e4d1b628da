package audit

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// MinKeyLen is the shortest HMAC key egressd accepts, writing or verifying:
// a key the writer would refuse cannot have keyed a log.
const MinKeyLen = 16

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Key verifies HMAC-keyed chains. With a key every chain must be keyed;
	// without one a keyed chain's hashes cannot be checked, and Verify says
	// so.
	Key []byte
	// OtherKeys are more keys, for files written across a change of key,
	// given oldest first (Key the oldest): each chain is checked with the
	// key that verifies its genesis, and keeps it to its end. A run under
	// a key given earlier than the key of a run before it is refused: a
	// retired key's holder writing after the change. A prune receipt is
	// keyed with the key of the run kept after it.
	OtherKeys [][]byte
	// Checkpoints are {chain, seq, hash} records written to an independent
	// sink; each is cross-checked against the log.
	Checkpoints []CheckpointRecord
	// UnreadCheckpoints are the line numbers, in the checkpoints file, of
	// lines that name a checkpoint but do not parse (CheckpointLines.Unread):
	// the verdict says they were not cross-checked.
	UnreadCheckpoints []int
	// Keep, for egressd audit prune, is the file that stays after the
	// files verified are removed: its first line must begin the run that
	// follows the last one in them (see keptAfter). Only that line is read.
	Keep string
	// NoWriter, for egressd audit prune, says no process writes the files
	// (prune holds their locks, see Hold): a chain open at the end of the
	// files then crashed, rather than perhaps still running.
	NoWriter bool
	// RunLink, for egressd run's files of one id (--run-files), is the
	// link file beside them (STATE/audit/ID.lastrun): the run it names as
	// the newest must be in the files (see lastRunLinked).
	RunLink string
}

// NamesRunBefore reports whether the chain's genesis says which run came
// before it (none, or the hash of that run's last line): otherwise the run
// before it is not proven to be the one before it in the files.
func (c ChainVerdict) NamesRunBefore() bool {
	return c.PrevRun == "none" || isHexHash(c.PrevRun)
}

// ChainVerdict is one chain (one writer process's run) found in the files.
type ChainVerdict struct {
	ID    string
	Keyed bool
	KeyID string
	First uint64 // the seq of its genesis
	Last  uint64 // the last seq verified
	Lines int
	// End is how the chain ends in the files: "shutdown" (closed cleanly),
	// "crashed" (a new chain starts without its shutdown record: the run
	// was killed, or its end cut off), "broken" (the problem is in it), or
	// "" while it is still open (cut off at the end of the files).
	End string
	// Problem says why a crashed chain is not whole.
	Problem string
	// File is where its genesis is; OwnFile says the genesis claims that
	// file for this run alone (egressd run's ID.PID.log).
	File    string
	OwnFile bool
	// PrevRun is its genesis's prev_run: "none" (no run before it), the
	// hash of the last line of the run before it, or "unknown" / "" (not
	// linked: the run before it is not named).
	PrevRun string
	// Hash is the hash of its last line verified, read in the same pass
	// as the line was checked.
	Hash string
	// FirstTime and LastTime are the times of its first and last lines.
	FirstTime, LastTime string
	// Integration is the stem of the run's files its genesis names
	// (egressd run's ID), "" when it names none.
	Integration string
	// Checkpoints counts its checkpoints cross-checked: one at or before
	// a crashed run's last line, and none past it, proves where it ended.
	Checkpoints int
	// Receipt says the chain is a prune receipt (keyed, checked with the
	// key), not a run: a second prune that removes it lists it apart.
	Receipt bool
	// KeyIndex is which --key verified it, from 1 (0: unkeyed, or no key
	// given).
	KeyIndex int
}

// Verdict is what Verify found.
type Verdict struct {
	Intact bool
	// IntactThrough is the last seq verified before the first problem, in
	// the chain where it is (or the last chain's last seq when intact).
	IntactThrough uint64
	// Problem names the first broken place: file, seq and what is wrong.
	Problem string
	Keyed   bool   // some chain is HMAC-keyed (from its genesis record)
	KeyID   string // the key id of the first keyed chain
	Chains  []ChainVerdict
	// PrunedChains are the runs prune receipts in the files say were
	// removed (ID and Last only), each once; PrunedReceipts are the
	// earlier receipts a later prune removed with them, which are no runs.
	PrunedChains   []ChainVerdict
	PrunedReceipts []ChainVerdict
	// Proves says plainly what the verification establishes, for the part
	// that verified.
	Proves      string
	Lines       int
	Checkpoints int // checkpoints cross-checked
	// Notes are findings that do not break the chain but limit what the
	// checkpoints prove (a chain none of them covers).
	Notes []string
	// CrashesOnly says the files are not intact only because runs ended
	// without a shutdown record: every line was verified.
	CrashesOnly bool
	// KeepKey is which --key verified the genesis of prune's file to keep
	// (VerifyOptions.Keep), from 1, and KeepKeyID its key id: the receipt
	// is keyed with it.
	KeepKey   int
	KeepKeyID string
}

// Verify checks every chain across files, in order. A file may hold
// several chains one after another (a writer restarted on the same path),
// and a chain may span files (rotation). Within a chain: every line's hash
// over its exact bytes, seq without gaps from 1, each prev equal to the
// line before's hash, the same key throughout, and a clean-shutdown record
// at its end (or a rotation record followed by the genesis that continues
// it). Checkpoints are matched by chain id and seq; one past the end of
// its chain is a rollback, one for a chain not in the files is reported.
func Verify(files []string, opts VerifyOptions) (Verdict, error) {
	return verifyFiles(files, opts, nil)
}

// VerifyAndRead verifies the files as Verify does and reads their records
// in the same pass: each file is opened once, and every record comes from
// the very bytes whose hashes were checked. A report built from them is a
// report of what was verified, whatever replaces a file on disk meanwhile
// (verifying one open and reading another let a swapped-in log be reported
// as intact). Past a break the rest is still read, unverified, for the
// report that says so. A line that is not JSON is an error naming the file
// and line, as ReadFiles.
func VerifyAndRead(files []string, opts VerifyOptions) (Verdict, []Record, error) {
	var recs []Record
	v, err := verifyFiles(files, opts, func(name string, n int, line []byte) error {
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("%s:%d: not an audit line: %v", name, n, err)
		}
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return Verdict{}, nil, err
	}
	return v, recs, nil
}

// lineSink receives every line of a file as it is read, verified or not.
type lineSink func(name string, lineNo int, line []byte) error

func verifyFiles(files []string, opts VerifyOptions, sink lineSink) (Verdict, error) {
	var keys [][]byte
	for _, k := range append([][]byte{opts.Key}, opts.OtherKeys...) {
		if k == nil {
			continue
		}
		if len(k) < MinKeyLen {
			return Verdict{}, fmt.Errorf("the key is %d bytes: egressd refuses keys under %d bytes, so no log was keyed with it", len(k), MinKeyLen)
		}
		keys = append(keys, k)
	}
	v := &verifier{opts: opts, keys: keys, receiptKey: -1, checkpoints: map[string]map[uint64]string{}, checkpointNames: map[string]map[string]bool{}, prunedChains: map[string]uint64{}, began: map[string]string{}}
	v.readCheckpoints(opts.Checkpoints)
	for i, f := range files {
		fh, err := openLog(f)
		if err != nil {
			return Verdict{}, err
		}
		err = v.file(f, fh, i == 0, sink)
		fh.Close()
		if err != nil {
			return Verdict{}, err
		}
		if v.out.Problem != "" && sink == nil {
			return v.finish(), nil
		}
	}
	if v.out.Problem != "" {
		return v.finish(), nil
	}
	if c := v.cur; c != nil {
		switch {
		case v.lastAction == "rotate":
			v.fail(v.lastFile, v.seq, "the log was rotated after this line but the next file is missing")
		case opts.NoWriter:
			v.crashedAtEnd()
		default:
			v.fail(v.lastFile, v.seq, fmt.Sprintf("chain %s is truncated after seq %d: no clean-shutdown record and no continuation (or the writer is still running)", c.ID, v.seq))
		}
	}
	if v.out.Problem == "" && opts.Keep != "" {
		if err := v.keptAfter(opts.Keep); err != nil {
			return Verdict{}, err
		}
	}
	if v.out.Problem == "" && opts.RunLink != "" {
		v.lastRunLinked(opts.RunLink)
	}
	if v.out.Problem == "" {
		v.unmatchedCheckpoints()
	}
	return v.finish(), nil
}

type verifier struct {
	// keepChain is the chain of prune's file to keep (VerifyOptions.Keep).
	keepChain string
	opts      VerifyOptions
	// keys are every key given, oldest first; chainKey is the one that
	// verified the open chain's genesis (nil before it, or for an unkeyed
	// chain), newestKey the index of the newest that verified a chain so
	// far, and receiptKey that of the prune receipt the next run must
	// follow (-1: none).
	keys        [][]byte
	chainKey    []byte
	newestKey   int
	receiptKey  int
	checkpoints map[string]map[uint64]string // chain id -> seq -> hash
	// checkpointNames are the integrations each chain's checkpoints name.
	checkpointNames map[string]map[string]bool
	// receipt is the prune receipt just read, until a chain follows it;
	// prunedChains are the chains receipts say were removed, by last seq.
	receipt      *pruneReceipt
	prunedChains map[string]uint64
	// lastPruned is the last chain a receipt listed so far.
	lastPruned string
	out        Verdict
	cur        *ChainVerdict // the chain being read; nil before the first and after a shutdown
	seq        uint64
	prev       string
	lastAction string
	lastFile   string
	// lastChainFile is the file where the last closed chain ended.
	lastChainFile string
	// curFile is the file of the open chain's last line: where it ends
	// if it crashed (not the file of the genesis that follows it).
	curFile string
	// began is the file where each chain's genesis was read.
	began map[string]string
	// unlinked counts chains whose genesis names no run before it.
	unlinked int
	// crashes are the findings of crashed, in order.
	crashes []string
	// linkedBy holds the chains the next chain's genesis names the end of
	// (prev_run is the hash of their last line).
	linkedBy map[string]bool
	// linkLost are runs that started with the link file rewritten
	// (prev_run=unreadable) and no checkpoints to rule out a removal.
	linkLost []string
}

// lineFields are the fields Verify reads from each line.
type lineFields struct {
	Time   string  `json:"time"`
	Event  string  `json:"event"`
	Action string  `json:"action"`
	Msg    string  `json:"msg"`
	Seq    uint64  `json:"seq"`
	Prev   *string `json:"prev"`
	Hash   string  `json:"hash"`
}

// maxLine bounds a line verify reads: egressd caps every field, so its
// longest line (a summary listing its targets) is tens of KiB; a longer one
// is not egressd's and must not exhaust memory.
const maxLine = 1 << 20

const hashTail = len(`,"hash":"`) + 64 + len(`"}`)

// file verifies the lines of one file, handing each to sink (when not nil)
// as it goes. Verification stops at the first problem; reading for sink
// does not.
func (v *verifier) file(name string, r io.Reader, first bool, sink lineSink) error {
	br := bufio.NewReaderSize(r, maxLine)
	if v.out.Problem == "" {
		v.lastFile = name
	}
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadSlice('\n')
		if len(line) == 0 && err == io.EOF {
			if lineNo == 1 {
				v.fail(name, v.seq, "file is empty: its genesis record is missing")
			}
			return nil
		}
		if err == bufio.ErrBufferFull {
			v.fail(name, v.seq+1, fmt.Sprintf("a line longer than %d bytes: egressd never writes one", maxLine))
			if sink != nil {
				return fmt.Errorf("%s:%d: a line longer than %d bytes: not an audit line", name, lineNo, maxLine)
			}
			return nil
		}
		if err != nil && err != io.EOF {
			return err
		}
		whole := bytes.HasSuffix(line, []byte("\n"))
		if !whole {
			v.fail(name, v.seq, fmt.Sprintf("the last line is cut off after seq %d (a partial write)", v.seq))
		} else {
			line = line[:len(line)-1]
			if v.out.Problem == "" {
				v.line(name, line, lineNo == 1, first && lineNo == 1)
			}
		}
		if sink == nil {
			if !whole || v.out.Problem != "" {
				return nil
			}
			continue
		}
		if err := sink(name, lineNo, line); err != nil {
			return err
		}
	}
}

func (v *verifier) line(file string, line []byte, firstInFile, firstOfAll bool) {
	var f lineFields
	if err := json.Unmarshal(line, &f); err != nil || f.Prev == nil || len(line) < hashTail || !bytes.HasPrefix(line[len(line)-hashTail:], []byte(`,"hash":"`)) {
		v.fail(file, v.seq+1, "not a chained audit line (edited, or not an egressd audit log)")
		return
	}
	isGenesis := f.Event == string(Lifecycle) && f.Action == "genesis"
	switch {
	case isGenesis:
		if !v.genesis(file, f, firstOfAll) {
			return
		}
	case firstOfAll:
		v.fail(file, f.Seq, "the first file does not begin at a genesis record: it is not the start of a chain (pass the files from the first one), or its beginning was cut off")
		return
	case firstInFile:
		v.fail(file, f.Seq, "the file does not start with a genesis record: its beginning was cut off")
		return
	case v.cur == nil:
		v.fail(file, f.Seq, "a line follows a clean-shutdown record without a new genesis: lines were appended to a closed chain")
		return
	}
	switch {
	case f.Seq != v.seq+1 && f.Seq <= v.seq:
		v.fail(file, f.Seq, fmt.Sprintf("seq %d comes after seq %d: lines were reordered or repeated", f.Seq, v.seq))
		return
	case f.Seq != v.seq+1:
		v.fail(file, f.Seq, fmt.Sprintf("seq jumps from %d to %d: %d line(s) deleted or moved", v.seq, f.Seq, f.Seq-v.seq-1))
		return
	case *f.Prev != v.prev:
		v.fail(file, f.Seq, "prev does not match the hash of the line before: a line was deleted, reordered or edited")
		return
	}
	if (f.Action == "rotate" || f.Action == "shutdown") && f.Event == string(Lifecycle) && msgField(f.Msg, "chain") != v.cur.ID {
		v.fail(file, f.Seq, fmt.Sprintf("a %s record of chain %s inside chain %s: lines of two chains were spliced", f.Action, msgField(f.Msg, "chain"), v.cur.ID))
		return
	}
	if isGenesis && v.seq == 0 && !v.newChainKey(file, line, f) { // a new chain: its key is the one its genesis verifies with
		return
	}
	if !v.hashMatches(line, f.Hash) {
		v.fail(file, f.Seq, "the line's bytes do not match its hash: the line was edited")
		return
	}
	if f.Event == string(Lifecycle) && (f.Action == Pruned || f.Action == PrunedChain) {
		v.readPruned(f)
	}
	if want, ok := v.checkpoints[v.cur.ID][f.Seq]; ok {
		v.out.Checkpoints++
		v.cur.Checkpoints++
		if want != f.Hash {
			v.fail(file, f.Seq, "the hash differs from the checkpoint recorded for this chain and seq: the chain was rewritten")
			return
		}
	}
	v.seq, v.prev, v.lastAction = f.Seq, f.Hash, f.Action
	v.cur.Last, v.cur.Hash, v.cur.LastTime = f.Seq, f.Hash, f.Time
	v.cur.Lines++
	v.curFile = file
	v.out.Lines++
	v.out.IntactThrough = f.Seq
	if f.Action == "shutdown" && f.Event == string(Lifecycle) {
		v.cur.End = "shutdown"
		v.cur = nil
		v.lastChainFile = file
	}
}

// genesis checks a genesis record: it either starts a new chain at seq 1
// (after a clean shutdown, or at the start of the first file) or continues
// the open chain after its rotation record, with the same id and key.
func (v *verifier) genesis(file string, f lineFields, firstOfAll bool) bool {
	id, keyID := msgField(f.Msg, "chain"), msgField(f.Msg, "key_id")
	if keyID == "" {
		keyID = "none"
	}
	if v.cur != nil && v.lastAction != "rotate" {
		v.crashed(file, f.Seq)
	}
	switch {
	case v.cur != nil:
		switch {
		case *f.Prev != v.prev:
			v.fail(file, f.Seq, "this genesis does not continue the file before it: a file in between is missing")
		case id != v.cur.ID:
			v.fail(file, f.Seq, fmt.Sprintf("chain %s was rotated but chain %s continues it: the rest of the chain was replaced", v.cur.ID, id))
		case keyID != v.cur.KeyID:
			v.fail(file, f.Seq, fmt.Sprintf("chain %s was keyed with key id %s and continues with key_id=%s: a chain keeps its key across files, so this is a break (a downgrade to recompute the rest)", v.cur.ID, v.cur.KeyID, keyID))
		}
		return v.out.Problem == ""
	case firstOfAll && *f.Prev != "":
		v.fail(file, f.Seq, "the chain continues from an earlier file that was not given: pass it too (if it was deleted, the log is incomplete)")
		return false
	case *f.Prev != "":
		v.fail(file, f.Seq, "a genesis that continues an earlier file follows a chain that was closed cleanly: a file in between is missing")
		return false
	case f.Seq != 1:
		v.fail(file, f.Seq, fmt.Sprintf("chain %s begins at seq %d with no earlier file: a chain begins at seq 1, so it was re-chained or its start is missing", id, f.Seq))
		return false
	}
	// A receipt given before says this run was removed: its file here is
	// a copy put back (round 21), whose own checkpoints would otherwise
	// vouch for it.
	if _, pruned := v.prunedChains[id]; pruned {
		v.fail(file, f.Seq, fmt.Sprintf("chain %s was removed by egressd audit prune (a receipt given lists it), yet its file is here: a copy of a pruned run was put back", id))
		return false
	}
	if !v.aloneInOwnFile(file, f.Seq, id, msgField(f.Msg, "file") == OwnFile) || !v.followsRun(file, f, id) {
		return false
	}
	keyed := keyID != "none"
	if !keyed && len(v.keys) > 0 {
		v.fail(file, f.Seq, fmt.Sprintf("a key was given but chain %s is not keyed: an unkeyed chain can be recomputed by whoever edits it", id))
		return false
	}
	v.out.Chains = append(v.out.Chains, ChainVerdict{ID: id, Keyed: keyed, KeyID: keyID, First: f.Seq,
		File: file, OwnFile: msgField(f.Msg, "file") == OwnFile, PrevRun: msgField(f.Msg, "prev_run"), FirstTime: f.Time,
		Integration: msgField(f.Msg, "integration")})
	v.cur = &v.out.Chains[len(v.out.Chains)-1]
	v.began[id] = file
	v.seq, v.prev = 0, ""
	if keyed && !v.out.Keyed {
		v.out.Keyed, v.out.KeyID = true, keyID
	}
	return true
}

// followsRun checks a new chain's prev_run, the hash of the last line of
// the run before it (found in the file it was appended to, or remembered in
// the state folder for a stream): the run before it here must end there. A
// genesis without prev_run, or with prev_run=unknown (a log from before it
// was recorded, a stream without a state folder, a run after a crash), is
// not linked: the verdict says that boundary's order is not proven.
func (v *verifier) followsRun(file string, f lineFields, id string) bool {
	prevRun := msgField(f.Msg, "prev_run")
	sameFile := len(v.out.Chains) > 0 && v.lastChainFile == file
	name, before := msgField(f.Msg, "integration"), ""
	if len(v.out.Chains) > 0 {
		before = v.out.Chains[len(v.out.Chains)-1].Integration
	}
	switch {
	case name != "" && before != "" && name != before:
		// Each integration's runs link only to each other: given together,
		// a run would read as following the other id's, or as finding its
		// link file deleted, which it did not.
		v.fail(file, f.Seq, fmt.Sprintf("run %s of integration %s follows a run of integration %s here: each integration's runs are linked to each other only, so verify each integration's files separately (egressd audit verify --run-files STATE/audit/ID)", id, name, before))
		return false
	case prevRun == "unknown" && msgField(f.Msg, "prev_open") != "":
		return v.followsOpenRun(file, f, id, msgField(f.Msg, "prev_open"))
	case prevRun == Unreadable:
		v.lostLink(file, f.Seq, id, fmt.Sprintf("the link file was missing or unreadable when run %s (%s) started: its content was not what egressd writes, so a run before it may have been removed and the link rewritten to hide it", id, file))
		return true
	case prevRun == "none" && len(v.out.Chains) > 0 && msgField(f.Msg, "file") == OwnFile:
		// egressd run's own file: the link file was there for the run
		// before it, so "no run before" means it was deleted since.
		v.lostLink(file, f.Seq, id, fmt.Sprintf("the link file was missing or unreadable when run %s (%s) started: it says no run came before it, yet chain %s comes before it here, so the link file was deleted after that run and a run in between may have been removed (if the runs before it were written by an egressd without ID.lastrun, verify the files from this one on separately)", id, file, v.out.Chains[len(v.out.Chains)-1].ID))
		return true
	case prevRun == "" || prevRun == "unknown":
		v.out.Notes = append(v.out.Notes, fmt.Sprintf("chain %s (%s) does not name the run before it (prev_run %s): that no run was removed, replayed or reordered before it is not proven", id, file, orNone(prevRun)))
		v.unlinked++
		return true
	case prevRun == "none" && sameFile:
		v.fail(file, f.Seq, fmt.Sprintf("chain %s says no run came before it (an empty file, or the first run with its state folder), yet chain %s comes before it here: runs were spliced together", id, v.out.Chains[len(v.out.Chains)-1].ID))
	case prevRun == "none" && len(v.out.Chains) > 0:
		v.out.Notes = append(v.out.Notes, fmt.Sprintf("chain %s (%s) says no run came before it, yet it follows chain %s in another file: the runs are not linked, so that no run was removed between them is not proven", id, file, v.out.Chains[len(v.out.Chains)-1].ID))
		v.unlinked++
		return true
	case prevRun == "none":
		return true
	case !sameFile && v.followsPrune(id, file, prevRun):
		return true
	case !sameFile && (len(v.out.Chains) == 0 || prevRun != v.prev):
		v.fail(file, f.Seq, fmt.Sprintf("chain %s was appended after an earlier run (ending in hash %s) that is not in the files given: a run was removed from the start of this file, or a whole file of runs (egressd run's ID.PID.log) was deleted, or pass the earlier files in the order the runs started (where runs were removed with egressd audit prune, give its receipt in their place)", id, prevRun))
	case prevRun != v.prev:
		v.fail(file, f.Seq, fmt.Sprintf("chain %s was appended after a run ending in hash %s, but the run before it here ends in %s: a run in between was removed", id, prevRun, v.prev))
	}
	if v.out.Problem == "" && len(v.out.Chains) > 0 { // prev_run names the end of the chain before
		if v.linkedBy == nil {
			v.linkedBy = map[string]bool{}
		}
		v.linkedBy[v.out.Chains[len(v.out.Chains)-1].ID] = true
	}
	return v.out.Problem == ""
}

// lostLink records a run that started without the link file egressd
// wrote: a problem unless checkpoints are given, which are held to every
// chain, so a removed run they cover fails verify anyway.
//
// Only checkpoints of that run's own chain count: the journal then held
// this integration's checkpoints, and a run removed before it would have
// left its own there. Checkpoints of other integrations alone, or of no
// run of these files, rule nothing out (round 20: adding another
// integration's journal turned BROKEN into intact).
func (v *verifier) lostLink(file string, seq uint64, chain, what string) {
	v.unlinked++
	if len(v.checkpoints[chain]) > 0 {
		v.out.Notes = append(v.out.Notes, what+"; the checkpoints given hold this run's own, so a run of this integration removed before it is caught by its checkpoints")
		return
	}
	v.linkLost = append(v.linkLost, fmt.Sprintf("%s: seq %d: %s; give the checkpoints that hold this run's own (--checkpoints) to rule that out", file, seq, what))
}

// hashMatches checks a line's hash over its bytes, with the open chain's
// key, unless the chain is keyed and no key was given (then only links are
// checked, and finish says so).
func (v *verifier) hashMatches(line []byte, hash string) bool {
	if v.cur.Keyed && len(v.keys) == 0 {
		return true
	}
	return hashedWith(v.chainKey, line, hash)
}

// newChainKey finds the key of the chain whose genesis line is: none for
// an unkeyed chain, else the key given that verifies it, which must not
// be older than the key of a chain before it (round 47: the holder of a
// retired key wrote runs after the change, labelled with the new key's
// id), and must be the key of a prune receipt it follows (round 47: a
// receipt forged with the retired key removed runs written under the new
// one).
func (v *verifier) newChainKey(file string, line []byte, f lineFields) bool {
	k, ok := v.anyKeyMatches(line, f.Hash, v.cur.Keyed)
	switch {
	case !ok:
		v.fail(file, f.Seq, fmt.Sprintf("the line's bytes do not match its hash with the key given: the line was edited, or chain %s (key id %s) was keyed with another key; give every key the files were written with (--key is repeatable, oldest first)", v.cur.ID, v.cur.KeyID))
		return false
	case k < 0: // unkeyed, or no key given
		v.chainKey = nil
		return true
	case k < v.newestKey:
		v.fail(file, f.Seq, fmt.Sprintf("chain %s verifies with --key #%d, given before the key (#%d) of a run before it: keys are given oldest first, and a run under an older key after one under a newer was written by whoever still holds the older key, after the change", v.cur.ID, k+1, v.newestKey+1))
		return false
	case v.receiptKey >= 0 && k != v.receiptKey:
		v.fail(file, f.Seq, fmt.Sprintf("chain %s follows a prune receipt keyed with another key (--key #%d, not #%d): egressd audit prune keys a receipt with the key of the run kept after it, so this receipt is not the operator's", v.cur.ID, v.receiptKey+1, k+1))
		return false
	}
	v.receiptKey = -1
	v.chainKey, v.newestKey = v.keys[k], k
	v.cur.KeyIndex = k + 1
	return true
}

// anyKeyMatches finds the key a line's hash was made with: -1 for an
// unkeyed line, else the index of one of the keys given (-1 with no key
// given: only links are checked then).
func (v *verifier) anyKeyMatches(line []byte, hash string, keyed bool) (key int, ok bool) {
	if !keyed {
		return -1, hashedWith(nil, line, hash)
	}
	if len(v.keys) == 0 {
		return -1, true
	}
	for i, k := range v.keys {
		if hashedWith(k, line, hash) {
			return i, true
		}
	}
	return -1, false
}

// hashedWith checks a line's hash, made with key (nil: unkeyed).
func hashedWith(key, line []byte, hash string) bool {
	c := chain{key: key}
	h := c.hasher()
	h.Write(line[:len(line)-hashTail])
	return hmac.Equal([]byte(hex.EncodeToString(h.Sum(nil))), []byte(hash))
}

// msgField reads key=value out of a lifecycle record's msg.
func msgField(msg, key string) string {
	for _, kv := range strings.Fields(msg) {
		if val, ok := strings.CutPrefix(kv, key+"="); ok {
			return val
		}
	}
	return ""
}

func (v *verifier) fail(file string, seq uint64, what string) {
	if v.out.Problem == "" {
		v.out.Problem = fmt.Sprintf("%s: seq %d: %s", file, seq, what)
		if v.cur != nil {
			v.cur.End = "broken"
		}
	}
}

// crashed closes the open chain, which a new genesis follows without its
// shutdown record: the run was killed (kill -9, OOM, power loss) or its end
// was cut off. That is a finding about that run, not the end of
// verification: every later run is still verified, so one crash does not
// leave the rest of the file open to edits. The new run's prev_run names
// the last line the crashed run wrote, so cutting lines off its end
// still breaks a link. The chain ended in the file of its last line,
// which is not the file of the genesis after it when each run has its
// own file: taking that file would make the next run look appended to it.
func (v *verifier) crashed(file string, seq uint64) {
	c := v.cur
	c.End = "crashed"
	c.Problem = fmt.Sprintf("%s: seq %d: chain %s ends at seq %d without a clean-shutdown record and a new chain starts here: the run crashed, or the end of it was cut off", file, seq, c.ID, v.seq)
	v.crashes = append(v.crashes, c.Problem)
	v.cur, v.lastChainFile = nil, v.curFile
}

// crashedAtEnd closes the chain open at the end of the files when no
// process writes them (VerifyOptions.NoWriter): it crashed.
func (v *verifier) crashedAtEnd() {
	c := v.cur
	c.End = "crashed"
	c.Problem = fmt.Sprintf("%s: seq %d: chain %s ends at seq %d without a clean-shutdown record, and no process holds its file: the run crashed, or the end of it was cut off", v.curFile, v.seq, c.ID, v.seq)
	v.crashes = append(v.crashes, c.Problem)
	v.cur, v.lastChainFile = nil, v.curFile
}
