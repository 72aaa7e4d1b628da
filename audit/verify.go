package audit

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Key verifies an HMAC-keyed chain. Without it a keyed chain's hashes
	// cannot be checked, and Verify says so.
	Key []byte
	// Checkpoints are {seq, hash} pairs written to an independent sink; each
	// is cross-checked against the log.
	Checkpoints []CheckpointRecord
}

// CheckpointRecord is one checkpoint line.
type CheckpointRecord struct {
	Chain string `json:"chain"`
	Seq   uint64 `json:"seq"`
	Hash  string `json:"hash"`
}

// Verdict is what Verify found.
type Verdict struct {
	Intact bool
	// IntactThrough is the last seq verified before the first problem (or
	// the last seq when intact).
	IntactThrough uint64
	// Problem names the first broken place: file, seq and what is wrong.
	Problem string
	Keyed   bool   // the chain is HMAC-keyed (from its genesis record)
	KeyID   string // the key id the genesis record names
	// Proves says plainly what the verification establishes.
	Proves      string
	Lines       int
	Checkpoints int // checkpoints cross-checked
}

// Verify checks the chain across files, in order: every line's hash over
// its exact bytes, seq without gaps, each prev equal to the line before's
// hash, a genesis record at the start of every file (linking to the last
// hash of the file before), and a clean-shutdown record at the end (or a
// rotation record followed by the next file).
func Verify(files []string, opts VerifyOptions) (Verdict, error) {
	v := &verifier{opts: opts, checkpoints: map[uint64]string{}}
	for _, c := range opts.Checkpoints {
		v.checkpoints[c.Seq] = c.Hash
	}
	for i, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return Verdict{}, err
		}
		err = v.file(f, fh, i == 0)
		fh.Close()
		if err != nil {
			return Verdict{}, err
		}
		if v.out.Problem != "" {
			return v.finish(), nil
		}
	}
	if v.out.Problem == "" && v.lastAction != "shutdown" {
		switch v.lastAction {
		case "rotate":
			v.fail(v.lastFile, v.seq, "the log was rotated after this line but the next file is missing")
		default:
			v.fail(v.lastFile, v.seq, fmt.Sprintf("truncated after seq %d: no clean-shutdown record and no continuation (or the writer is still running)", v.seq))
		}
	}
	return v.finish(), nil
}

type verifier struct {
	opts        VerifyOptions
	checkpoints map[uint64]string
	out         Verdict
	seq         uint64
	prev        string
	lastAction  string
	lastFile    string
	keyKnown    bool
}

// lineFields are the fields Verify reads from each line.
type lineFields struct {
	Event  string  `json:"event"`
	Action string  `json:"action"`
	Msg    string  `json:"msg"`
	Seq    uint64  `json:"seq"`
	Prev   *string `json:"prev"`
	Hash   string  `json:"hash"`
}

const hashTail = len(`,"hash":"`) + 64 + len(`"}`)

func (v *verifier) file(name string, r io.Reader, first bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	v.lastFile = name
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadBytes('\n')
		if len(line) == 0 && err == io.EOF {
			if lineNo == 1 {
				v.fail(name, v.seq, "file is empty: its genesis record is missing")
			}
			return nil
		}
		if err != nil && err != io.EOF {
			return err
		}
		if !bytes.HasSuffix(line, []byte("\n")) {
			v.fail(name, v.seq, fmt.Sprintf("the last line is cut off after seq %d (a partial write)", v.seq))
			return nil
		}
		line = line[:len(line)-1]
		v.line(name, line, lineNo == 1, first)
		if v.out.Problem != "" {
			return nil
		}
	}
}

func (v *verifier) line(file string, line []byte, firstInFile, firstFile bool) {
	var f lineFields
	if err := json.Unmarshal(line, &f); err != nil || f.Prev == nil || len(line) < hashTail || !bytes.HasPrefix(line[len(line)-hashTail:], []byte(`,"hash":"`)) {
		v.fail(file, v.seq+1, "not a chained audit line (edited, or not an egressd audit log)")
		return
	}
	if firstInFile {
		if f.Action != "genesis" {
			v.fail(file, f.Seq, "the file does not start with a genesis record")
			return
		}
		switch {
		case firstFile && *f.Prev != "":
			v.fail(file, f.Seq, "the chain continues from an earlier file that was not given: pass it too (if it was deleted, the log is incomplete)")
			return
		case firstFile:
			v.seq, v.prev = f.Seq-1, ""
		case v.lastAction != "rotate":
			v.fail(file, f.Seq, "the file before this one did not end in a rotation record")
			return
		case *f.Prev != v.prev:
			v.fail(file, f.Seq, "this file does not continue the one before it: a file in between is missing")
			return
		}
		v.readGenesis(f.Msg)
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
	if v.keyKnown {
		body := line[:len(line)-hashTail]
		c := chain{key: v.opts.Key}
		h := c.hasher()
		h.Write(body)
		if want := hex.EncodeToString(h.Sum(nil)); !hmac.Equal([]byte(want), []byte(f.Hash)) {
			v.fail(file, f.Seq, "the line's bytes do not match its hash: the line was edited")
			return
		}
	}
	if want, ok := v.checkpoints[f.Seq]; ok {
		v.out.Checkpoints++
		if want != f.Hash {
			v.fail(file, f.Seq, "the hash differs from the checkpoint recorded for this seq: the chain was rewritten")
			return
		}
	}
	v.seq, v.prev, v.lastAction = f.Seq, f.Hash, f.Action
	v.out.Lines++
	v.out.IntactThrough = f.Seq
}

// readGenesis learns from a genesis record whether the chain is keyed.
func (v *verifier) readGenesis(msg string) {
	keyID := "none"
	for _, kv := range strings.Fields(msg) {
		if id, ok := strings.CutPrefix(kv, "key_id="); ok {
			keyID = id
		}
	}
	v.out.Keyed = keyID != "none"
	v.out.KeyID = keyID
	v.keyKnown = !v.out.Keyed || v.opts.Key != nil
}

func (v *verifier) fail(file string, seq uint64, what string) {
	if v.out.Problem == "" {
		v.out.Problem = fmt.Sprintf("%s: seq %d: %s", file, seq, what)
	}
}

func (v *verifier) finish() Verdict {
	out := v.out
	out.Intact = out.Problem == ""
	switch {
	case out.Keyed && v.opts.Key == nil:
		out.Intact = false
		if out.Problem == "" {
			out.Problem = fmt.Sprintf("the chain is keyed (key id %s): pass its key to check the hashes; only seq and prev links were checked", out.KeyID)
		}
		out.Proves = "nothing about the line contents: without the key only the links were checked"
	case out.Keyed:
		out.Proves = "no line was edited, deleted, reordered or added by anyone without the key, and the log was closed cleanly"
	case len(v.opts.Checkpoints) > 0:
		out.Proves = "no corruption; lines up to each cross-checked checkpoint are as they were when the checkpoint was written. An unkeyed chain does not stop a deliberate rewrite after the last checkpoint"
	default:
		out.Proves = "no accidental corruption, deletion or reordering. An unkeyed chain can be recomputed by whoever edits it: use a key or checkpoints to detect that"
	}
	return out
}

// ReadCheckpoints reads checkpoint lines (JSON objects with seq and hash)
// from r, ignoring every other line, so a whole stderr capture can be given.
func ReadCheckpoints(r io.Reader) ([]CheckpointRecord, error) {
	var out []CheckpointRecord
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var c struct {
			Event string `json:"event"`
			CheckpointRecord
		}
		if json.Unmarshal(sc.Bytes(), &c) == nil && c.Event == string(Checkpoint) && c.Hash != "" {
			out = append(out, c.CheckpointRecord)
		}
	}
	return out, sc.Err()
}
