package selftest

import (
	"bytes"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// capturedStdout is a pipe the outer half puts on its own standard output
// while the battery runs. egressd run hands the program this process's
// standard output (and no other descriptor), so the inner half's results
// come back over it whatever the sandbox does with the state folder.
type capturedStdout struct {
	r, w  *os.File
	saved int
	mu    sync.Mutex
	buf   bytes.Buffer
	done  chan struct{}
}

// CaptureStdout puts a pipe on this process's standard output until
// ReturnStdout, and keeps everything written to it.
func (b *Beacons) CaptureStdout() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	c := &capturedStdout{r: r, w: w, done: make(chan struct{})}
	if c.saved, err = unix.FcntlInt(1, unix.F_DUPFD_CLOEXEC, 3); err != nil {
		r.Close()
		w.Close()
		return err
	}
	if err := unix.Dup3(int(w.Fd()), 1, 0); err != nil {
		unix.Close(c.saved)
		r.Close()
		w.Close()
		return err
	}
	go func() {
		defer close(c.done)
		chunk := make([]byte, 32<<10)
		for {
			n, err := r.Read(chunk)
			c.mu.Lock()
			c.buf.Write(chunk[:n])
			c.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	b.out = c
	return nil
}

// ReturnStdout gives this process its own standard output back and
// returns what was written to the pipe. A process the program left behind
// that still holds the pipe cannot hold the report up: what arrived within
// a second of the program's end is what is judged.
func (b *Beacons) ReturnStdout() []byte {
	c := b.out
	if c == nil {
		return nil
	}
	b.out = nil
	unix.Dup3(c.saved, 1, 0)
	unix.Close(c.saved)
	c.w.Close()
	select {
	case <-c.done:
	case <-time.After(time.Second):
		c.r.SetReadDeadline(time.Now())
		<-c.done
		c.drain() // a read past its deadline leaves what is buffered
	}
	c.r.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes())
}

// drain reads what the pipe holds without waiting for more.
func (c *capturedStdout) drain() {
	rc, err := c.r.SyscallConn()
	if err != nil {
		return
	}
	chunk := make([]byte, 32<<10)
	rc.Control(func(fd uintptr) {
		for {
			n, err := unix.Read(int(fd), chunk)
			if n <= 0 || err != nil {
				return
			}
			c.mu.Lock()
			c.buf.Write(chunk[:n])
			c.mu.Unlock()
		}
	})
}
