package audit

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRunFilesPicksOneIDsFilesWithEveryRotatedNameInGenesisOrder: the
// names egressd run and rotation give a run's files (PID.log, PID.N.log,
// .1, -DATE, .<timestamp>) are taken in the order of their genesis times,
// whatever their names sort as, a run's files together even when it was
// rotated after the next run started; another id's files are left out, by name
// (com.x.y.PID.log) or, where the name cannot tell (com.x.7.PID.log reads
// as com.x's PID.N.log), by the integration its genesis names. An empty
// file among them is an error naming it.
func TestRunFilesPicksOneIDsFilesWithEveryRotatedNameInGenesisOrder(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	write := func(name, integration string, minute int) {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		l, err := New(f, Options{Integration: integration, Now: func() time.Time { return start.Add(time.Duration(minute) * time.Minute) }})
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
	// A run rotated (max_size_mb) after the next run started: both of
	// its files come before the next run's.
	minute := 4
	rolled, err := CreateFile(filepath.Join(dir, "com.x.30.log.20261201T000400.000000000Z"), 0)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(rolled, Options{Integration: "com.x", Now: func() time.Time { return start.Add(time.Duration(minute) * time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	write("com.x.31.log", "com.x", 5)
	minute = 6
	current, err := CreateFile(filepath.Join(dir, "com.x.30.log"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Rotate(current); err != nil {
		t.Fatal(err)
	}
	rolled.Close()
	l.Close()
	current.Close()
	write("com.x.20.log-20261201", "com.x", 3)
	write("com.x.20.log.1", "com.x", 2)
	write("com.x.9.2.log", "com.x", 1)
	write("com.x.7.11.log", "com.x.7", 0)
	write("com.x.y.12.log", "com.x.y", 0)
	write("com.x.lastrun.log", "com.x", 0)
	got, err := RunFiles(filepath.Join(dir, "com.x"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i] = filepath.Base(got[i])
	}
	want := []string{"com.x.9.2.log", "com.x.20.log.1", "com.x.20.log-20261201", "com.x.30.log.20261201T000400.000000000Z", "com.x.30.log", "com.x.31.log"}
	if !slices.Equal(got, want) {
		t.Fatalf("RunFiles:\n got %v\nwant %v", got, want)
	}
	os.WriteFile(filepath.Join(dir, "com.x.40.log"), nil, 0o600)
	if _, err := RunFiles(filepath.Join(dir, "com.x")); err == nil || !strings.Contains(err.Error(), "com.x.40.log: is empty") {
		t.Fatalf("an empty run file: %v", err)
	}
}
