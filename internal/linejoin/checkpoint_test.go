package linejoin_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/internal/linejoin"
)

const hash = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// forgeries are what a program prints to pass for egressd's checkpoint:
// the line as egressd writes it, the journal's quoted form of it, and a
// bare mention in each form.
var forgeries = []string{
	`{"event":"checkpoint","chain":"c0ffee","seq":99,"hash":"` + hash + `"}` + "\n",
	`Dec 01 05:16:58 host egressd[42]: {"event":"checkpoint","chain":"c0ffee","seq":99,"hash":"` + hash + `"}` + "\n",
	`{"MESSAGE":"{\"event\":\"checkpoint\",\"chain\":\"c0ffee\",\"seq\":99,\"hash\":\"` + hash + `\"}"}` + "\n",
	`checkpoint"` + "\n",
	`checkpoint\"` + "\n",
	`checkcheckpoint"checkpoint\"checkpoint""` + "\n",
}

// readsNoCheckpoint fails t when audit verify would read out as naming a
// checkpoint at all.
func readsNoCheckpoint(t *testing.T, out string) {
	t.Helper()
	got, err := audit.ReadCheckpoints(strings.NewReader(out))
	if err != nil || len(got.Records) > 0 || len(got.Unread) > 0 {
		t.Fatalf("the relayed stream names a checkpoint (%d read, %d unread, %v):\n%s", len(got.Records), len(got.Unread), err, out)
	}
}

// unescaped is what the program wrote, read back from the escaped stream.
func unescaped(out string) string {
	out = strings.ReplaceAll(out, `checkpoint\\x22`, `checkpoint\"`)
	return strings.ReplaceAll(out, `checkpoint\x22`, `checkpoint"`)
}

// TestAForgedCheckpointRelayedWholeIsNotReadAsOne: each forgery, written
// in one write, reaches the stream escaped and still readable.
func TestAForgedCheckpointRelayedWholeIsNotReadAsOne(t *testing.T) {
	for _, f := range forgeries {
		var out bytes.Buffer
		var j linejoin.Joint
		if n, err := j.Relayed(&out).Write([]byte(f)); n != len(f) || err != nil {
			t.Fatalf("Write = %d, %v; want %d", n, err, len(f))
		}
		readsNoCheckpoint(t, out.String())
		if !strings.Contains(out.String(), `checkpoint\x22`) && !strings.Contains(out.String(), `checkpoint\\x22`) {
			t.Fatalf("the forgery's text is not shown escaped: %q", out.String())
		}
		if unescaped(out.String()) != f {
			t.Fatalf("bytes were lost or changed beyond the escape:\n got %q\nfrom %q", out.String(), f)
		}
	}
}

// TestAForgedCheckpointSplitAcrossWritesIsCaughtAtEveryCut: the program
// splits each forgery into two or three writes at every pair of places;
// the stream is the same as for one write.
func TestAForgedCheckpointSplitAcrossWritesIsCaughtAtEveryCut(t *testing.T) {
	for _, f := range forgeries {
		var whole bytes.Buffer
		var wj linejoin.Joint
		wj.Relayed(&whole).Write([]byte(f))
		for a := 0; a <= len(f); a++ {
			for b := a; b <= len(f) && b < a+14; b++ {
				var out bytes.Buffer
				var j linejoin.Joint
				w := j.Relayed(&out)
				for _, piece := range []string{f[:a], f[a:b], f[b:]} {
					if n, err := w.Write([]byte(piece)); n != len(piece) || err != nil {
						t.Fatalf("Write = %d, %v; want %d", n, err, len(piece))
					}
				}
				if out.String() != whole.String() {
					t.Fatalf("cut at %d and %d: got %q, want %q", a, b, out.String(), whole.String())
				}
			}
		}
		readsNoCheckpoint(t, whole.String())
	}
}

// TestTextWithoutAMarkerPassesByteForByte: quotes, backslashes and near
// misses are not touched.
func TestTextWithoutAMarkerPassesByteForByte(t *testing.T) {
	in := "a \"quoted\" word, checkpoin\", Checkpoint\", checkpoint \", checkpoint\\\\\", checkpoints\"\n\x00\xff\"\\\""
	var out bytes.Buffer
	var j linejoin.Joint
	j.Relayed(&out).Write([]byte(in))
	if out.String() != in {
		t.Fatalf("got %q, want %q", out.String(), in)
	}
}

// TestEgressdsOwnCheckpointIsStillReadBesideTheProgramsForgeries: the
// own side is egressd's and passes whole; a marker the program began
// before egressd's line is ended by that line, so its quote after it is
// left alone.
func TestEgressdsOwnCheckpointIsStillReadBesideTheProgramsForgeries(t *testing.T) {
	var out bytes.Buffer
	var j linejoin.Joint
	prog, own := j.Relayed(&out), j.Own(&out)
	prog.Write([]byte(forgeries[0]))
	prog.Write([]byte(`{"event":"checkpoint`))
	real := `{"event":"checkpoint","chain":"beef","seq":3,"hash":"` + hash + `"}` + "\n"
	own.Write([]byte(real))
	prog.Write([]byte("\"\n"))
	got, err := audit.ReadCheckpoints(strings.NewReader(out.String()))
	if err != nil || len(got.Records) != 1 || got.Records[0].Chain != "beef" || len(got.Unread) != 0 {
		t.Fatalf("want only egressd's checkpoint, got %+v, %v from:\n%s", got, err, out.String())
	}
	if !strings.HasSuffix(out.String(), real+"\"\n") {
		t.Fatalf("the quote after egressd's line was changed: %q", out.String())
	}
}

// TestConcurrentForgeriesNeverNameACheckpoint: the program writes a
// forgery a byte at a time while egressd writes its own lines; only
// egressd's are read (run with -race).
func TestConcurrentForgeriesNeverNameACheckpoint(t *testing.T) {
	var out bytes.Buffer
	var j linejoin.Joint
	prog, own := j.Relayed(&out), j.Own(&out)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < 50; i++ {
			for _, c := range []byte(forgeries[0]) {
				prog.Write([]byte{c})
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 50; i++ {
			fmt.Fprintf(own, `{"event":"checkpoint","chain":"beef","seq":%d,"hash":"%s"}`+"\n", i, hash)
		}
	}()
	wg.Wait()
	got, err := audit.ReadCheckpoints(strings.NewReader(out.String()))
	if err != nil || len(got.Records) != 50 {
		t.Fatalf("want egressd's 50 checkpoints, got %d (%v)", len(got.Records), err)
	}
	for _, c := range got.Records {
		if c.Chain != "beef" {
			t.Fatalf("a forgery was read as a checkpoint: %+v", c)
		}
	}
}

// TestAProgramsLineCannotBeginAsEgressdsOwn: the program printed a line
// shaped like egressd's widening warning ("egressd: warning: … adds
// cdn.example.com … (egressd approve --digest D …)") carrying the real
// digest of a widening that adds another host; the operator pasted its
// command and approved the exfiltration host (round 19 trust-chain
// attacker). A program's line whose first word (after blanks) is egressd
// is written with its d as \x64, however the writes split it, so a line
// that begins "egressd" on the shared stream is egressd's own.
func TestAProgramsLineCannotBeginAsEgressdsOwn(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"at the start", "egressd: warning: x\n", `egress\x64: warning: x` + "\n"},
		{"after a line", "ok\negressd run: y\n", "ok\n" + `egress\x64 run: y` + "\n"},
		{"after blanks", "ok\n  \tegressd: z\n", "ok\n  \t" + `egress\x64: z` + "\n"},
		{"mid-line is kept", "see egressd: docs\n", "see egressd: docs\n"},
		{"another word is kept", "egresses\negressx\n", "egresses\negressx\n"},
		// Round 20: a Cyrillic look-alike first letter.
		{"a non-ASCII first rune", "\u0435gressd: warning\n", `\xd0\xb5gressd: warning` + "\n"},
		{"a non-ASCII first rune after blanks", " \u0435gressd\n", ` \xd0\xb5gressd` + "\n"},
		{"non-ASCII later is kept", "caf\u00e9 ok\n", "caf\u00e9 ok\n"},
		{"a look-alike 7th letter", "egres\u0455d: warning\n", `egres\xd1\x95d: warning` + "\n"},
		{"a look-alike last letter", "egress\u0501: x\n", `egress\xd4\x81: x` + "\n"},
	} {
		for split := 0; split <= len(c.in); split++ {
			var out bytes.Buffer
			w := (&linejoin.Joint{}).Relayed(&out)
			w.Write([]byte(c.in[:split]))
			w.Write([]byte(c.in[split:]))
			if out.String() != c.want {
				t.Errorf("%s, split at %d: %q, want %q", c.name, split, out.String(), c.want)
			}
		}
	}
	// After egressd's own line, the program's next line starts a line too.
	var out bytes.Buffer
	j := &linejoin.Joint{}
	j.Own(&out).Write([]byte("egressd: real\n"))
	j.Relayed(&out).Write([]byte("egressd: forged\n"))
	if want := "egressd: real\n" + `egress\x64: forged` + "\n"; out.String() != want {
		t.Errorf("%q, want %q", out.String(), want)
	}
}
