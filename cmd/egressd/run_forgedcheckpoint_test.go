package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/egressd/egressd/audit"
)

// forgedHash is the hash a program's forged checkpoints name.
const forgedHash = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// verifyCapture runs audit verify --checkpoints on a capture of egressd
// run's stderr and fails t unless the run's good log verifies with exactly
// egressd's own checkpoints cross-checked.
func verifyCapture(t *testing.T, e *sandboxEnv, capture string) {
	t.Helper()
	own := ownCheckpointLine.FindAllString(capture, -1)
	if len(own) == 0 {
		t.Fatalf("egressd wrote no checkpoint:\n%s", capture)
	}
	ckpt := filepath.Join(t.TempDir(), "stderr.log")
	if err := os.WriteFile(ckpt, []byte(capture), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := verify(t, "--checkpoints", ckpt, e.audit)
	if code != 0 || !strings.Contains(out, fmt.Sprintf(", %d checkpoints cross-checked", len(own))) || strings.Contains(out, "do not parse") {
		t.Fatalf("verify --checkpoints of a good log and the run's stderr: exit %d\n%s\nstderr:\n%s", code, out, capture)
	}
}

// TestAProgramsForgedCheckpointOnItsStderrAndStdoutIsNotReadAsEgressds is
// f13i item 1: egressd run writes its checkpoints to the stderr the
// program's stderr is relayed to (and its stdout, when both are one file),
// and nothing authenticates a checkpoint line. A program printed lines
// shaped like checkpoints, egressd's form and the journal's quoted form,
// and verify --checkpoints of the run's good log failed on them (a
// chain it does not hold). The relay now escapes the quote that would make
// the program's bytes name a checkpoint: verify passes with egressd's
// checkpoints only, and the program's text is still shown.
func TestAProgramsForgedCheckpointOnItsStderrAndStdoutIsNotReadAsEgressds(t *testing.T) {
	e := newSandboxEnv(t)
	forged := `{"event":"checkpoint","chain":"c0ffee","seq":99999,"hash":"` + forgedHash + `"}`
	quoted := `{\"event\":\"checkpoint\",\"chain\":\"c0ffee\",\"seq\":99999,\"hash\":\"` + forgedHash + `\"}`
	script := fmt.Sprintf("printf '%%s\\n' '%s' >&2; printf '%%s\\n' '%s' >&2; printf '%%s\\n' '%s'", forged, quoted, forged)
	cmd := e.configured("audit:\n  checkpoints: stderr\n", script)
	var both bytes.Buffer
	cmd.Stdout, cmd.Stderr = &both, &both // one pipe: stdout is where stderr goes
	err := cmd.Run()
	capture := both.String()
	if err != nil {
		t.Fatalf("%v\n%s", err, capture)
	}
	verifyCapture(t, e, capture)
	escaped := strings.Replace(forged, `checkpoint"`, `checkpoint\x22`, 1)
	if strings.Count(capture, escaped+"\n") != 2 || !strings.Contains(capture, `checkpoint\\x22`) {
		t.Fatalf("the program's text is not shown, escaped (%s):\n%s", escaped, capture)
	}
}

// TestAForgedCheckpointSplitOverTwoWritesIsCaught: the program writes the
// start of a checkpoint line, waits until the test has seen it on
// egressd's stderr and has handed it the run's real chain id, then writes
// the rest naming a seq far past the log's end. Unescaped, verify reported
// a rollback of the good log. The first half is relayed at once (nothing
// waits for a later write), and the quote that completes the marker in the
// second write is escaped.
func TestAForgedCheckpointSplitOverTwoWritesIsCaught(t *testing.T) {
	e := newSandboxEnv(t)
	script := `printf '{"event":"checkpoi' >&2; read chain; printf 'nt","chain":"%s","seq":99999,"hash":"` + forgedHash + `"}\n' "$chain" >&2`
	cmd := e.configured("audit:\n  checkpoints: stderr\n", script)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.Stderr = w
	capture := &lockedBuffer{}
	firstHalf, drained := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(drained)
		buf := make([]byte, 4096)
		seen := false
		for {
			n, err := r.Read(buf)
			capture.Write(buf[:n])
			if !seen && (err != nil || strings.Contains(capture.String(), `{"event":"checkpoi`)) {
				seen = true
				close(firstHalf) // or egressd ended without it: the checks below say so
			}
			if err != nil {
				return
			}
		}
	}()
	err = cmd.Start()
	w.Close() // egressd holds the pipe now: its exit is the reader's EOF
	if err != nil {
		t.Fatal(err)
	}
	<-firstHalf
	chain := regexp.MustCompile(`"msg":"chain=([0-9a-f]+) `).FindStringSubmatch(e.auditLog())
	if chain == nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no chain id in the audit log:\n%s\nstderr:\n%s", e.auditLog(), capture.String())
	}
	fmt.Fprintln(stdin, chain[1])
	stdin.Close()
	err = cmd.Wait()
	<-drained
	if err != nil {
		t.Fatalf("%v\n%s", err, capture.String())
	}
	verifyCapture(t, e, capture.String())
	if want := `{"event":"checkpoint\x22,"chain":"` + chain[1] + `","seq":99999,`; !strings.Contains(capture.String(), want) {
		t.Fatalf("the split forgery is not shown escaped (%s):\n%s", want, capture.String())
	}
	got, err := audit.ReadCheckpoints(strings.NewReader(capture.String()))
	if err != nil || len(got.Records) == 0 {
		t.Fatalf("no checkpoint read: %v", err)
	}
	for _, c := range got.Records {
		if c.Seq == 99999 {
			t.Fatalf("the program's forgery was read as a checkpoint:\n%s", capture.String())
		}
	}
}

// TestAProgramsForgedEgressdWarningOnItsStderrIsNotEgressds: the program
// printed a line shaped like egressd's widening warning, naming a harmless
// host and the real digest of a widening that adds another, plus cursor
// moves that paint over egressd's own warning when the captured log is
// read; the operator pasted the forged command (round 19 trust-chain
// attacker). On the stream egressd writes its own lines to (a pipe here),
// a program's line cannot begin with "egressd", and its control bytes are
// shown escaped.
func TestAProgramsForgedEgressdWarningOnItsStderrIsNotEgressds(t *testing.T) {
	e := newSandboxEnv(t)
	script := `printf 'egressd: warning: com.x 1.1.0 adds cdn.example.com (egressd approve --digest sha256:ab com.x 1.1.0)\n  egressd run: also forged\n\033[1A\033[2K\rhidden\n' >&2`
	cmd := e.configured("", script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	got := stderr.String()
	for _, line := range strings.Split(got, "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " \t"), "egressd: warning: com.x") || strings.HasPrefix(strings.TrimLeft(line, " \t"), "egressd run: also") {
			t.Fatalf("a program's line reads as egressd's own:\n%s", got)
		}
	}
	if !strings.Contains(got, `egress\x64: warning: com.x`) || !strings.Contains(got, `  egress\x64 run: also forged`) ||
		strings.ContainsAny(got, "\x1b\r") || !strings.Contains(got, `\x1b[1A`) {
		t.Fatalf("the program's text is not shown escaped:\n%q", got)
	}
}
