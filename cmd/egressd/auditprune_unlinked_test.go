package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egressd/egressd/audit"
)

// TestPruningARunThatDoesNotNameTheRunBeforeItDoesNotLaunderTheGap is the
// eleventh attacker's second break: run 2 started while run 1 still ran, so
// its genesis says prev_run=unknown. Pruning run 2 alone wrote a receipt
// that starts prev_run=none, and verify of the receipt and run 3 then said
// "each run follows the run before it" with run 1 deleted without a trace.
// Prune refuses a run whose predecessor it cannot name, unless that
// predecessor is pruned with it.
func TestPruningARunThatDoesNotNameTheRunBeforeItDoesNotLaunderTheGap(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "audit.key")
	key := []byte("0123456789abcdef0123456789abcdef")
	os.WriteFile(keyFile, key, 0o600)
	link := filepath.Join(dir, "x.lastrun")
	open := func(name string) (*audit.Log, *audit.File, string) {
		path := filepath.Join(dir, name)
		f, err := audit.CreateFile(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		l, err := audit.New(f, audit.Options{Key: key, KeyID: "k1", RunLink: link})
		if err != nil {
			t.Fatal(err)
		}
		return l, f, path
	}
	l1, f1, run1 := open("run1.log")
	l2, f2, run2 := open("run2.log") // starts while run 1 runs
	l1.Close()
	f1.Close()
	l2.Close()
	f2.Close()
	l3, f3, run3 := open("run3.log")
	l3.Close()
	f3.Close()
	if data, _ := os.ReadFile(run2); !strings.Contains(string(data), "prev_run=unknown") {
		t.Fatalf("run 2 names the run before it; the test proves nothing:\n%s", data)
	}

	receipt := filepath.Join(dir, "pruned.log")
	out, errs, code := runCLI(t, "audit", "prune", "--key", keyFile, "--receipt", receipt, "--keep", run3, run2)
	if _, err := os.Stat(run2); code != 1 || err != nil || !strings.Contains(errs, "does not name the run before it") || !strings.Contains(errs, "nothing removed") {
		t.Fatalf("prune of a run that does not name the run before it: exit %d (file gone: %v)\n%s%s", code, err != nil, out, errs)
	}
	if _, err := os.Stat(receipt); err == nil {
		t.Fatal("a refused prune left a receipt")
	}

	out, errs, code = runCLI(t, "audit", "prune", "--key", keyFile, "--receipt", receipt, "--keep", run3, run1, run2)
	if code != 0 {
		t.Fatalf("prune of run 2 with run 1, the run before it: exit %d\n%s%s", code, out, errs)
	}
	if out, code := verify(t, "--key", keyFile, receipt, run3); code != 0 {
		t.Fatalf("verify of the receipt and run 3: exit %d\n%s", code, out)
	}
}
