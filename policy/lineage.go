package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

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

// maxLineage bounds Lineage, with the marks pinned for long-running
// processes (PinSeen): a process that has not read version memory for
// more writes than this, and pinned nothing, cannot tell what they
// replaced, and refuses the read until it restarts.
const maxLineage = 64

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
// write. The lineage keeps its last maxLineage marks, and every older one
// pinned names (the writes long-running processes last saw: PinSeen).
func (s *State) written(pinned map[uint64]string) {
	if s.read != "" {
		s.Lineage = append(s.Lineage, WriteMark{Write: s.Writes, SHA256: s.read})
	}
	if n := len(s.Lineage); n > maxLineage {
		var kept []WriteMark
		for i, mark := range s.Lineage {
			// A pinned write is kept whatever file it names: one that is
			// not the file its process saw tells that process an older
			// copy was restored.
			if _, pin := pinned[mark.Write]; i >= n-maxLineage || (pin && len(kept) < maxPins) {
				kept = append(kept, mark)
			}
		}
		s.Lineage = kept
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
		// Its lineage no longer reaches that write: pinSeen keeps it
		// there for a process that notes what it saw, so this one did
		// not, or its note was lost. Nothing says whether a copy was
		// restored.
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

// PinSeen makes m, version memory a long-running process reads again and
// again (serve), note in the state folder the write it last read or
// wrote (readers/PID), and every writer then keeps that write in the
// lineage however many follow, so this process can always tell a file
// written over what it saw from an older copy (round 54: 65 writes by
// other processes between two reloads took the write it saw out of the
// lineage, and it refused every reload until restarted).
func (m *Memory) PinSeen() { m.pinSeen = true }

// readersDir holds the notes of PinSeen; maxPins bounds how many a writer
// keeps (the newest; older notes are removed).
const (
	readersDir = "readers"
	maxPins    = 16
)

// noteSeen writes this process's note. A note that cannot be written
// costs only the pin: the read it notes has been checked already.
func (m *Memory) noteSeen(mark WriteMark) {
	dir := filepath.Join(m.dir, readersDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return
	}
	data, err := json.Marshal(mark)
	if err != nil {
		return
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".%d.tmp", os.Getpid()))
	if os.WriteFile(tmp, data, 0o600) == nil {
		os.Rename(tmp, filepath.Join(dir, strconv.Itoa(os.Getpid())))
	}
}

// pinned returns the writes the newest maxPins notes name, and removes the
// older notes (processes long gone).
func (m *Memory) pinned() map[uint64]string {
	dir := filepath.Join(m.dir, readersDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	type note struct {
		name string
		at   int64
	}
	var notes []note
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
			notes = append(notes, note{e.Name(), info.ModTime().UnixNano()})
		}
	}
	sort.Slice(notes, func(i, j int) bool { return notes[i].at > notes[j].at })
	out := map[uint64]string{}
	for i, n := range notes {
		path := filepath.Join(dir, n.name)
		if i >= maxPins {
			os.Remove(path)
			continue
		}
		data, err := safefile.ReadRegularNoFollow(path, 1<<10)
		var mark WriteMark
		if err == nil && json.Unmarshal(data, &mark) == nil && stateSum().MatchString(mark.SHA256) {
			out[mark.Write] = mark.SHA256
		}
	}
	return out
}
