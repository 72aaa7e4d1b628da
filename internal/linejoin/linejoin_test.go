package linejoin

import (
	"bytes"
	"sync"
	"testing"
)

// TestOwnLineAfterAnUnterminatedRelayedLineStartsALineOfItsOwn: the
// program's "x" without a line break, then egressd's line: a break is put
// between them, and only then.
func TestOwnLineAfterAnUnterminatedRelayedLineStartsALineOfItsOwn(t *testing.T) {
	var out bytes.Buffer
	var j Joint
	prog, own := j.Relayed(&out), j.Own(&out)
	own.Write([]byte("egressd: first\n"))
	prog.Write([]byte("line\nx"))
	own.Write([]byte("egressd: second\n"))
	prog.Write([]byte("done\n"))
	own.Write([]byte("egressd: third\n"))
	if want := "egressd: first\nline\nx\negressd: second\ndone\negressd: third\n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}

// TestConcurrentWritersNeverInterleaveWithinAWrite: each own line arrives
// whole, at a line start, however the program's writes race with it.
func TestConcurrentWritersNeverInterleaveWithinAWrite(t *testing.T) {
	var out bytes.Buffer
	var j Joint
	prog, own := j.Relayed(&out), j.Own(&out)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < 500; i++ {
			prog.Write([]byte("abc"))
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 500; i++ {
			own.Write([]byte("OWN\n"))
		}
	}()
	wg.Wait()
	for _, line := range bytes.Split(out.Bytes(), []byte("\n")) {
		if i := bytes.Index(line, []byte("OWN")); i > 0 || (i == 0 && len(line) != 3) {
			t.Fatalf("an own line does not stand alone: %q", line)
		}
	}
}
