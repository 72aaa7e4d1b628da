// Package linejoin shares one output stream between a program's relayed
// output and egressd's own one-line messages. egressd run relays the
// program's stderr to the stderr it writes its own lines to (warnings,
// audit checkpoints); a program that ends its output without a line break
// would otherwise have egressd's next line glued to its last one, so that
// a reader (journalctl, audit verify --checkpoints) sees the program's text
// in front of egressd's line, or sees a line egressd seems to have
// written begin with the program's bytes.
package linejoin

import (
	"io"
	"sync"
)

// Joint serialises the writes of both sides and knows whether the stream
// is in the middle of a line the program began.
type Joint struct {
	mu      sync.Mutex
	midLine bool // the last byte written was the program's, and not a line break
}

// Relayed returns a writer for the program's output to w: bytes pass as
// they are, in the order written.
func (j *Joint) Relayed(w io.Writer) io.Writer { return relayed{j, w} }

// Own returns a writer for egressd's own messages to w, each Write one or
// more whole lines: when the program left a line unterminated, a line
// break ends it first, so the message starts a line of its own.
func (j *Joint) Own(w io.Writer) io.Writer { return own{j, w} }

type relayed struct {
	j *Joint
	w io.Writer
}

func (r relayed) Write(p []byte) (int, error) {
	r.j.mu.Lock()
	defer r.j.mu.Unlock()
	n, err := r.w.Write(p)
	if n > 0 {
		r.j.midLine = p[n-1] != '\n'
	}
	return n, err
}

type own struct {
	j *Joint
	w io.Writer
}

func (o own) Write(p []byte) (int, error) {
	o.j.mu.Lock()
	defer o.j.mu.Unlock()
	if o.j.midLine && len(p) > 0 {
		if _, err := o.w.Write([]byte{'\n'}); err != nil {
			return 0, err
		}
		o.j.midLine = false
	}
	return o.w.Write(p)
}
