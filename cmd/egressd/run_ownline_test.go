package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/egressd/egressd/audit"
)

// ownCheckpointLine is a checkpoint line as egressd writes it, alone on
// its line.
var ownCheckpointLine = regexp.MustCompile(`(?m)^\{"event":"checkpoint","chain":"[0-9a-f]+","seq":\d+,"hash":"[0-9a-f]{64}"(,"integration":"[^"]+")?\}$`)

// TestRunEndsTheProgramsUnterminatedLineBeforeItsCheckpoint is f13g item
// 3: the program writes "x" to stderr without a line break and exits;
// egressd's stop checkpoint, written to the same stderr, was glued to it
// ("x{"event":"checkpoint",…}"), so a journal reader saw the program's
// text in front of egressd's line. egressd now ends the program's line
// first: "x" is a line of its own, the checkpoint another, and verify
// cross-checks it.
func TestRunEndsTheProgramsUnterminatedLineBeforeItsCheckpoint(t *testing.T) {
	e := newSandboxEnv(t)
	_, errs, code := runCmd(t, e.configured("audit:\n  checkpoints: stderr\n", "printf x >&2"))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	if !regexp.MustCompile(`(?m)^x$`).MatchString(errs) || !ownCheckpointLine.MatchString(errs) || strings.Contains(errs, `x{"event"`) {
		t.Fatalf("the program's unterminated line and egressd's checkpoint share a line:\n%q", errs)
	}
	ckpt := filepath.Join(t.TempDir(), "stderr.log")
	os.WriteFile(ckpt, []byte(errs), 0o600)
	out, code := verify(t, "--checkpoints", ckpt, e.audit)
	if code != 0 || regexp.MustCompile(`, 0 checkpoints cross-checked`).MatchString(out) {
		t.Fatalf("verify --checkpoints: exit %d\n%s", code, out)
	}
}

// TestAForgedCheckpointAfterEgressdsDoesNotMakeARewrittenLogAgree is f13g
// item 3's second half: nothing authenticates a checkpoint line, and
// egressd run's stderr carries the program's lines too. A program printed,
// after egressd's checkpoints, lines shaped like checkpoints for the same
// chain and seqs with the hashes of a rewritten (unkeyed, recomputed) log;
// verify kept the last checkpoint for each seq, so the forged ones replaced
// egressd's and the rewritten log verified. Two checkpoints that disagree
// now fail verify.
func TestAForgedCheckpointAfterEgressdsDoesNotMakeARewrittenLogAgree(t *testing.T) {
	files, stderr := realLog(t, false)
	real, err := audit.ReadCheckpoints(strings.NewReader(stderr))
	if err != nil || len(real.Records) == 0 {
		t.Fatalf("no checkpoint in egressd's stderr: %v\n%s", err, stderr)
	}
	rechain(t, files, 0, 3, "evil0.example", "benign.example")
	hashes := map[uint64]string{}
	for _, f := range files {
		for _, l := range readLines(t, f) {
			var rec struct {
				Seq  uint64 `json:"seq"`
				Hash string `json:"hash"`
			}
			if json.Unmarshal([]byte(l), &rec) == nil {
				hashes[rec.Seq] = rec.Hash
			}
		}
	}
	forged := stderr
	for _, c := range real.Records {
		forged += fmt.Sprintf("{\"event\":\"checkpoint\",\"chain\":%q,\"seq\":%d,\"hash\":%q}\n", c.Chain, c.Seq, hashes[c.Seq])
	}
	ckpt := filepath.Join(t.TempDir(), "stderr.log")
	os.WriteFile(ckpt, []byte(forged), 0o600)
	out, code := verify(t, append([]string{"--checkpoints", ckpt}, files...)...)
	if code != 1 || !strings.Contains(out, "name different hashes for this seq") {
		t.Fatalf("a rewritten log with forged checkpoints after egressd's: exit %d\n%s", code, out)
	}
}
