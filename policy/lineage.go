package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/egressd/egressd/internal/safefile"
)

// Version memory's lineage: each write of the state file names the files
// the writes before it replaced, so that a running process can tell a
// file written over the one it last saw from an older copy restored under
// it, even once other processes have written over that copy (State.Writes
// and State.Lineage).

// WriteMark is one write of the state file: its number, and the SHA-256
// of the file it replaced.
type WriteMark struct {
	Write  uint64 `json:"write"`
	SHA256 string `json:"sha256"`
}

// maxLineage bounds Lineage (about 90 bytes a mark): a process that has
// not read version memory for more writes than this cannot tell what they
// replaced, and refuses the read until it restarts. serve reads it every
// second (KeepUp). A variable only so that a test can make it small.
var maxLineage = 256

// descendsFrom reports whether s is write w, whose file's SHA-256 is sum,
// or was written over it.
func (s State) descendsFrom(w uint64, sum string) bool {
	if s.Writes == w {
		return s.read == sum
	}
	for _, mark := range s.Lineage {
		if mark.Write == w {
			return mark.SHA256 == sum
		}
	}
	return false
}

// names reports whether s's lineage has a mark for write w.
func (s State) names(w uint64) bool {
	for _, mark := range s.Lineage {
		if mark.Write == w {
			return true
		}
	}
	return false
}

// written records that s replaces the file it was read from, as one more
// write; the lineage keeps its last maxLineage marks.
func (s *State) written() {
	if s.read != "" {
		s.Lineage = append(s.Lineage, WriteMark{Write: s.Writes, SHA256: s.read})
	}
	if n := len(s.Lineage); n > maxLineage {
		s.Lineage = append([]WriteMark(nil), s.Lineage[n-maxLineage:]...)
	}
	s.Writes++
}

// fileSum is the SHA-256 of a state file's bytes, as Lineage holds it.
func fileSum(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// older says how s, read from the state file, fails to descend from the
// file this process last read or wrote, or "": fewer writes, another file
// at the same write, or a later write that does not name it among the
// files it replaced (round 53: writes made over a restored older copy
// counted it up to the number this process had seen).
func (m *Memory) older(s State) string {
	last := m.last.Load()
	switch {
	case last == nil || last.read == "":
		return ""
	case s.Writes < last.Writes:
		return fmt.Sprintf("holds write %d of version memory, older than write %d, which this process read or wrote: an older copy was restored; restore the newest copy", s.Writes, last.Writes)
	case s.Writes == last.Writes && s.read != last.read:
		return fmt.Sprintf("holds a write %d of version memory other than the one this process read or wrote: an older copy was restored and written over; restore the newest copy", s.Writes)
	case s.descendsFrom(last.Writes, last.read):
		return ""
	case !s.names(last.Writes):
		// Its lineage no longer reaches that write: more than maxLineage
		// writes since this process last read (KeepUp keeps serve within
		// it). Nothing says whether a copy was restored.
		return fmt.Sprintf("holds write %d of version memory, and its lineage no longer names the write %d this process read or wrote, so whether an older copy was restored since cannot be told; if none was, restart this process to take the file", s.Writes, last.Writes)
	}
	return fmt.Sprintf("holds write %d of version memory, which was not written over the write %d this process read or wrote: an older copy was restored and written over; restore the newest copy", s.Writes, last.Writes)
}

// Follows makes m judge its reads as prev would next: a read that was not
// written over what prev last read is refused ("egressd approve" binds
// only into the file its preview read, or one written over it).
func (m *Memory) Follows(prev *Memory) {
	if last := prev.last.Load(); last != nil {
		m.last.Store(last)
		m.seen.Store(prev.seen.Load())
		m.remembered.Store(prev.remembered.Load())
	}
}

// KeepUp reads version memory every period until ctx ends, so that the
// write this process last saw stays within the lineage of whatever is
// written next. A process that only reads at a reload (serve) fell out of
// it after maxLineage writes by other processes (round 54: an author
// bumping the version of an integration another process loads), and then
// refused every reload until restarted. A read that fails is refused as
// a reload's would be, and the reload that follows reports it.
func (m *Memory) KeepUp(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.Read()
		}
	}
}

// The newest write's mark is kept in versions.lock too, written under the
// lock after the state file: restoring an older versions.json does not
// roll it back. A running process judges only against the writes it has
// read, so a copy restored between two of its reads, and then written
// over, passed as written over what it saw (round 56: one KeepUp second
// was enough to put a waiting widening in force); every reader and writer
// now also requires the file to be, or descend from, the newest write.

// newest reads the newest write's mark from versions.lock, or nil: none
// written yet (a new folder, or an egressd from before the mark). A mark
// that does not parse, or that names less than this process saw there
// before, or none after one, is an error, never "none" (round 57: a
// removed or garbled versions.lock read as none, and a restored copy
// passed). Unless locked (the caller holds the lock already), it takes
// the lock shared, and release lets it go once the state file is read
// too: a writer rewrites the mark in place, and a reader between its
// truncate and its write read "no mark" (round 58: 6 of 200 runs beside a
// busy serve were refused as if the lock had been removed).
func (m *Memory) newest(locked bool) (mark *WriteMark, release func(), err error) {
	path := filepath.Join(m.dir, lockFile)
	release = func() {}
	var data []byte
	if locked {
		data, err = safefile.ReadRegularNoFollow(path, 1<<10)
	} else {
		data, release, err = readShared(path)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, release, fmt.Errorf("policy: state lock: %w", err)
	}
	seen := m.newestSeen.Load()
	if len(data) == 0 {
		if seen > 0 {
			return nil, release, fmt.Errorf("policy: %s no longer names the newest write of version memory (it named write %d when this process read it): it was removed or replaced; the last good policy stays in force: restore it, or restart this process", path, seen)
		}
		return nil, release, nil
	}
	var got WriteMark
	if json.Unmarshal(data, &got) != nil || !stateSum().MatchString(got.SHA256) {
		return nil, release, fmt.Errorf("policy: %s does not hold a mark egressd writes: it was edited; restore it, or stop every egressd and remove it deliberately", path)
	}
	if got.Write < seen {
		return nil, release, fmt.Errorf("policy: %s names write %d of version memory, older than write %d, which it named when this process read it: an older copy was restored; restore the newest copies; the last good policy stays in force", path, got.Write, seen)
	}
	for {
		if old := m.newestSeen.Load(); old >= got.Write || m.newestSeen.CompareAndSwap(old, got.Write) {
			return &got, release, nil
		}
	}
}

// readShared reads versions.lock under a shared lock, which it keeps until
// release: no symlink followed, no pipe blocked on, nothing but a regular
// file read.
func readShared(path string) ([]byte, func(), error) {
	none := func() {}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, none, fmt.Errorf("%s: is a symlink, not a regular file; egressd does not follow it here: remove it", path)
	}
	if err != nil {
		return nil, none, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, none, fmt.Errorf("%s: not a regular file", path)
	}
	if err := unix.Flock(fd, unix.LOCK_SH); err != nil {
		f.Close()
		return nil, none, err
	}
	release := func() { unix.Flock(fd, unix.LOCK_UN); f.Close() }
	buf := make([]byte, 1<<10)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		release()
		return nil, none, err
	}
	return buf[:n], release, nil
}

// writeNewest replaces the mark in versions.lock, held locked as f.
func writeNewest(f *os.File, mark WriteMark) error {
	data, err := json.Marshal(mark)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return err
	}
	return f.Sync()
}
