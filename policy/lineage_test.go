package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestARunningProcessTakesOnlyVersionMemoryWrittenOverWhatItSaw is round
// 53's f1: an older copy of versions.json restored under a running serve
// was refused for holding fewer writes, but every write another process
// (approve, run, a restarted serve) made over it counted it back up, and
// once it held as many as serve had seen, serve took it. Each write names
// the file it replaced: a running process takes only a file written over
// the one it last read or wrote.
func TestARunningProcessTakesOnlyVersionMemoryWrittenOverWhatItSaw(t *testing.T) {
	dir := t.TempDir()
	// Each change is one the id-and-binding comparison (lost) does not
	// see: the list that waits.
	wait := func(m *Memory, host string) {
		t.Helper()
		if err := writeRecord(m, "com.a", "1.0.0", host); err != nil {
			t.Fatal(err)
		}
	}
	serve, err := OpenMemory(dir)
	if err != nil {
		t.Fatal(err)
	}
	wait(serve, "a.example")
	wait(serve, "b.example")
	backup, err := os.ReadFile(StatePath(dir))
	if err != nil {
		t.Fatal(err)
	}
	lockBackup, err := os.ReadFile(filepath.Join(dir, lockFile))
	if err != nil {
		t.Fatal(err)
	}
	wait(serve, "c.example")
	wait(serve, "d.example") // serve has seen write 4

	// Other processes write over what serve saw: serve takes it.
	other, _ := OpenMemory(dir)
	wait(other, "e.example")
	wait(other, "f.example")
	if _, err := serve.Read(); err != nil {
		t.Fatalf("writes over what serve saw: %v", err)
	}

	// An older copy restored: refused by serve, and by every other
	// process, which would write over it: versions.lock names the newest
	// write (round 56: a copy restored between two of serve's reads, and
	// written over, passed as written over what serve saw).
	os.WriteFile(StatePath(dir), backup, 0o600)
	if _, err := serve.Read(); err == nil || !strings.Contains(err.Error(), "holds write 2 of version memory, older than write 6") {
		t.Fatalf("the older copy: %v", err)
	}
	fresh, _ := OpenMemory(dir) // a new process
	if err := fresh.update(func(s *State) error { s.IDs["com.a"] = Record{}; return nil }); err == nil || !strings.Contains(err.Error(), "an older copy was restored") {
		t.Fatalf("a new process wrote over the older copy: %v", err)
	}

	// A copy restored with its versions.lock too, and written over by
	// new processes up to the count serve saw and past: serve, which saw
	// write 6, still refuses it.
	os.WriteFile(filepath.Join(dir, lockFile), lockBackup, 0o600)
	for i, host := range []string{"g.example", "h.example", "i.example", "j.example", "k.example"} {
		fresh, _ := OpenMemory(dir) // a new process: it cannot know
		wait(fresh, host)
		if _, err := serve.Read(); err == nil {
			t.Fatalf("serve took the older copy after %d writes over it", i+1)
		}
	}
	if _, err := serve.Read(); err == nil || !strings.Contains(err.Error(), "which was not written over the write 6") {
		t.Fatalf("the older copy written past serve's count: %v", err)
	}
}

// TestAProcessThatKeepsUpFollowsAnyNumberOfWritesByOthers is round 54's
// f1: 65 writes by other processes (an author bumping the version of an
// integration another process loads on the same state folder) between
// two of serve's reloads took the write serve saw out of the lineage, and
// serve refused every reload until restarted, blaming a restored copy.
// serve reads version memory every second (KeepUp), so it stays within
// the lineage; a process that does not says it cannot tell, and blames
// no restore.
func TestAProcessThatKeepsUpFollowsAnyNumberOfWritesByOthers(t *testing.T) {
	defer func(n int) { maxLineage = n }(maxLineage)
	maxLineage = 16 // each write is an fsync
	for _, keepsUp := range []bool{true, false} {
		dir := t.TempDir()
		write := func(m *Memory, version string) {
			t.Helper()
			if err := writeRecord(m, "com.b", version); err != nil {
				t.Fatal(err)
			}
		}
		serve, _ := OpenMemory(dir)
		write(serve, "1.0.0")
		ctx, cancel := context.WithCancel(context.Background())
		if keepsUp {
			go serve.KeepUp(ctx, time.Millisecond)
		}
		other, _ := OpenMemory(dir)
		for i := 1; i <= 3*maxLineage; i++ {
			write(other, fmt.Sprintf("1.0.%d", i))
			if keepsUp && i%(maxLineage/2) == 0 {
				// Wait for serve to have read this write: what KeepUp's
				// period makes of a second's writes in serve.
				want := other.last.Load().Writes
				for serve.last.Load().Writes < want {
					runtime.Gosched()
				}
			}
		}
		cancel()
		_, err := serve.Read()
		switch {
		case keepsUp && err != nil:
			t.Fatalf("serve, keeping up, after %d writes by another process: %v", 3*maxLineage, err)
		case !keepsUp && (err == nil || !strings.Contains(err.Error(), "whether an older copy was restored since cannot be told")):
			t.Fatalf("a process that did not keep up, past the lineage: %v", err)
		}
	}
}

// TestACopyRestoredBetweenTwoReadsIsRefused is round 56's f3: serve had
// read write 4; another process made write 5 (a narrowing), and write 4
// was restored before serve's next read. The file was exactly what serve
// last saw, so serve took it, and wrote over it a widening that then
// needed no approval. versions.lock names the newest write: serve, and
// any writer, refuses a file that is not it nor written over it.
func TestACopyRestoredBetweenTwoReadsIsRefused(t *testing.T) {
	dir := t.TempDir()
	write := func(m *Memory, host string) error { return writeRecord(m, "com.a", "1.0.0", host) }
	serve, _ := OpenMemory(dir)
	if err := write(serve, "a.example"); err != nil {
		t.Fatal(err)
	}
	seen, _ := os.ReadFile(StatePath(dir))
	other, _ := OpenMemory(dir)
	if err := write(other, "b.example"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(StatePath(dir), seen, 0o600)
	if _, err := serve.Read(); err == nil || !strings.Contains(err.Error(), "is not write 2 of version memory, the newest egressd made") {
		t.Fatalf("serve read the copy restored between two of its reads: %v", err)
	}
	if err := write(serve, "c.example"); err == nil {
		t.Fatal("serve wrote over the copy restored between two of its reads")
	}
}

// TestAVersionsLockRemovedGarbledOrRestoredIsRefused is round 57's f1:
// versions.lock's mark read as "none" when it was removed or garbled, and
// a restored copy then passed; and a copy restored with its lock passed
// too. A process that saw a mark refuses none, a garbled one, or one that
// names less; a new process refuses a garbled one. (A copy of the whole
// folder restored before a process ever read a later write is a
// rollback no file in the folder can show: the README says so.)
func TestAVersionsLockRemovedGarbledOrRestoredIsRefused(t *testing.T) {
	write := func(m *Memory, host string) {
		t.Helper()
		if err := writeRecord(m, "com.a", "1.0.0", host); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, want string
		lock       func(dir string, lockBackup []byte)
	}{
		{"removed", "no longer names the newest write", func(dir string, _ []byte) { os.Remove(filepath.Join(dir, lockFile)) }},
		{"garbled", "does not hold a mark egressd writes", func(dir string, _ []byte) { os.WriteFile(filepath.Join(dir, lockFile), []byte("x"), 0o600) }},
		{"restored with the file", "older than write 2", func(dir string, lockBackup []byte) {
			os.WriteFile(filepath.Join(dir, lockFile), lockBackup, 0o600)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			serve, _ := OpenMemory(dir)
			write(serve, "a.example")
			jsonBackup, _ := os.ReadFile(StatePath(dir))
			lockBackup, _ := os.ReadFile(filepath.Join(dir, lockFile))
			write(serve, "b.example")
			if _, err := serve.Read(); err != nil { // serve sees the newest mark
				t.Fatal(err)
			}
			os.WriteFile(StatePath(dir), jsonBackup, 0o600)
			c.lock(dir, lockBackup)
			if _, err := serve.Read(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("serve: %v, want %q", err, c.want)
			}
		})
	}
}

// writeRecord makes one write of m: id's record at version, with the list
// that waits (pending; none for a plain version bump). A change of the
// pending list alone is one the id-and-binding comparison (lost) does not
// see, so only the lineage and the newest-write mark judge it.
func writeRecord(m *Memory, id, version string, pending ...string) error {
	digest := "sha256:" + strings.Repeat("1", 64)
	return m.update(func(s *State) error {
		s.IDs[id] = Record{Version: version, Digest: digest, Approved: Approved{Version: version, Digest: digest, Entries: []string{}}, Pending: pending}
		return nil
	})
}
