package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Record is what version memory keeps for one integration id. Records are
// never deleted: a removed id keeps its record as a tombstone, so it cannot
// come back with a lower version.
type Record struct {
	// Version and Digest are the highest version seen and its list's digest.
	Version string `json:"version"`
	Digest  string `json:"digest"`
	// Approved is the list in force: the first list seen, then every
	// narrowing, and every widening that passed the operator's gate.
	Approved Approved `json:"approved"`
	// Approvals are versions the operator approved with "egressd approve",
	// each with the digest seen at that version ("" if not seen yet).
	Approvals map[string]string `json:"approvals,omitempty"`
}

// Approved is a list that is in force.
type Approved struct {
	Version string   `json:"version"`
	Digest  string   `json:"digest"`
	Entries []string `json:"entries"`
}

// Memory is version memory. A nil *Memory remembers nothing across
// processes (check and explain use it that way: they never write state).
type Memory struct {
	dir string
	mem map[string]Record // used when dir is ""
}

// stateFile and lockFile live in the state directory.
const (
	stateFile = "versions.json"
	lockFile  = "versions.lock"
)

// DefaultStateDir is $XDG_STATE_HOME/egressd, or /var/lib/egressd for root.
func DefaultStateDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/egressd"
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "egressd")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "egressd")
	}
	return ""
}

// OpenMemory opens (creating, mode 0700) the state directory dir.
func OpenMemory(dir string) (*Memory, error) {
	if dir == "" {
		return nil, errors.New("policy: no state directory: set --state")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("policy: state directory: %w", err)
	}
	return &Memory{dir: dir}, nil
}

// InMemory returns a Memory that lives only as long as the process.
func InMemory() *Memory { return &Memory{mem: map[string]Record{}} }

// Update runs fn on id's record under an exclusive lock, and saves the
// record if fn returns nil. known says whether a record existed. Several
// egressd processes may share one state directory; the lock serialises them.
func (m *Memory) Update(id string, fn func(r *Record, known bool) error) error {
	if m.dir == "" {
		r, known := m.mem[id]
		if err := fn(&r, known); err != nil {
			return err
		}
		m.mem[id] = r
		return nil
	}
	unlock, err := m.lock()
	if err != nil {
		return err
	}
	defer unlock()
	all, err := m.readAll()
	if err != nil {
		return err
	}
	r, known := all[id]
	before, _ := json.Marshal(r)
	if err := fn(&r, known); err != nil {
		return err
	}
	if after, _ := json.Marshal(r); known && string(before) == string(after) {
		return nil // nothing changed: skip the write and its fsync
	}
	all[id] = r
	return m.writeAll(all)
}

func (m *Memory) lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(m.dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("policy: state lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("policy: state lock: %w", err)
	}
	return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

func (m *Memory) readAll() (map[string]Record, error) {
	all := map[string]Record{}
	data, err := os.ReadFile(filepath.Join(m.dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return all, nil
	}
	if err != nil {
		return nil, fmt.Errorf("policy: state: %w", err)
	}
	if err := json.Unmarshal(data, &all); err != nil {
		// A corrupt state file must not reset version memory silently.
		return nil, fmt.Errorf("policy: state file %s is corrupt (%v); restore it or remove it deliberately", filepath.Join(m.dir, stateFile), err)
	}
	return all, nil
}

// writeAll replaces the state file atomically: write, fsync, rename.
func (m *Memory) writeAll(all map[string]Record) error {
	data, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(m.dir, stateFile+".*")
	if err != nil {
		return fmt.Errorf("policy: state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("policy: state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("policy: state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("policy: state: %w", err)
	}
	return os.Rename(tmp.Name(), filepath.Join(m.dir, stateFile))
}

// Approve records the operator's approval of id at version. If that version
// has been seen, the approval is bound to its list's digest.
func (m *Memory) Approve(id, version string) error {
	return m.Update(id, func(r *Record, known bool) error {
		if r.Approvals == nil {
			r.Approvals = map[string]string{}
		}
		digest := ""
		if known && r.Version == version {
			digest = r.Digest
		}
		r.Approvals[version] = digest
		return nil
	})
}
