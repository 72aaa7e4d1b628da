package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// asJournal prefixes every line of a captured stderr as journalctl -u
// egressd prints it: "short" (the default) or "short-iso".
func asJournal(stderr, format string) string {
	prefix := "Dec 01 05:16:58 vm egressd[4242]: "
	if format == "short-iso" {
		prefix = "2026-12-01T05:16:58+0000 vm egressd[4242]: "
	}
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		b.WriteString(prefix + l + "\n")
	}
	return b.String()
}

// TestVerifyReadsCheckpointsFromTheJournalAsJournalctlPrintsThem is issue
// 13's b7: the systemd unit sends checkpoints to the journal, and
// journalctl prefixes each line with its time, host and unit. Verify read
// only lines beginning with the checkpoint object, so a rewritten unkeyed
// chain verified as intact with "0 checkpoints cross-checked".
func TestVerifyReadsCheckpointsFromTheJournalAsJournalctlPrintsThem(t *testing.T) {
	files, stderr := realLog(t, false)
	rechain(t, files, 0, 3, "evil0.example", "benign.example")
	for _, format := range []string{"short", "short-iso"} {
		journal := filepath.Join(t.TempDir(), "journal.txt")
		os.WriteFile(journal, []byte(asJournal(stderr, format)), 0o600)
		out, code := verify(t, "--checkpoints", journal, files[0], files[1])
		if code != 1 || !strings.Contains(out, "differs from the checkpoint recorded for this chain and seq: the chain was rewritten") {
			t.Fatalf("journalctl -o %s: exit %d:\n%s", format, code, out)
		}
	}
}

// TestVerifyWithACheckpointsFileItCannotReadSaysSo: a checkpoints file in
// which no checkpoint can be read (the wrong file, or a format egressd
// does not know) is not "intact, 0 checkpoints cross-checked": verify says
// so and exits 1; a line that names a checkpoint but does not parse is
// reported beside the ones that were read.
func TestVerifyWithACheckpointsFileItCannotReadSaysSo(t *testing.T) {
	files, stderr := realLog(t, false)
	dir := t.TempDir()
	none := filepath.Join(dir, "none.txt")
	os.WriteFile(none, []byte("Dec 01 05:16:58 vm egressd[4242]: egressd: serving com.test.weather on 127.0.0.1:1\n"), 0o600)
	out, errs, code := runCLI(t, "audit", "verify", "--checkpoints", none, files[0], files[1])
	if code != 1 || strings.Contains(out, "intact") || !strings.Contains(errs, "no checkpoint could be read from "+none) {
		t.Fatalf("a file with no checkpoint: exit %d:\n%s%s", code, out, errs)
	}
	garbled := filepath.Join(dir, "garbled.txt")
	bad := `Dec 01 05:16:59 vm egressd[4242]: {"event":"checkpoint","chain":"x","seq":"7","hash":"00"}` + "\n"
	os.WriteFile(garbled, []byte(bad), 0o600)
	if out, errs, code := runCLI(t, "audit", "verify", "--checkpoints", garbled, files[0], files[1]); code != 1 || !strings.Contains(errs, "1 line(s) name a checkpoint but none parses as one (line 1 first)") {
		t.Fatalf("a file whose only checkpoint does not parse: exit %d:\n%s%s", code, out, errs)
	}
	os.WriteFile(garbled, []byte(asJournal(stderr, "short")+bad), 0o600)
	out, code = verify(t, "--checkpoints", garbled, files[0], files[1])
	if code != 0 || !strings.Contains(out, "note: 1 line(s) of the checkpoints file name a checkpoint but do not parse as one (line ") {
		t.Fatalf("a garbled line beside good ones: exit %d:\n%s", code, out)
	}
}
