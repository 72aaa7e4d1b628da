package policy

import (
	"strings"
	"sync"
	"testing"
)

// TestAReadBesideAWriterNeverSeesTheMarkBeingWritten is round 58's f1: a
// writer rewrote versions.lock's mark in place (truncate, then write),
// and a reader between the two read "no mark": a process that had seen
// one refused version memory as if the lock had been removed (6 of 200
// egressd runs beside a busy serve; 917 of these reads). A reader takes
// the lock shared while it reads the mark and the file.
func TestAReadBesideAWriterNeverSeesTheMarkBeingWritten(t *testing.T) {
	dir := t.TempDir()
	w, _ := OpenMemory(dir)
	write := func(i int) error { return writeRecord(w, "com.a", "1.0.0", strings.Repeat("a", i%7+1)+".example") }
	if err := write(0); err != nil {
		t.Fatal(err)
	}
	r, _ := OpenMemory(dir)
	if _, err := r.Read(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	refused := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := r.Read(); err != nil {
				refused++
				if refused == 1 {
					t.Log(err)
				}
			}
		}
	}()
	for i := 1; i < 300; i++ {
		if err := write(i); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if refused > 0 {
		t.Fatalf("%d reads refused", refused)
	}
}
