package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/internal/safefile"
)

// Memory is version memory: what egressd remembers about each integration
// id and each manifest folder across processes. A Memory made by InMemory
// or ReadMemory never writes (check and explain use it that way).
type Memory struct {
	dir string
	mem *State // used when dir is ""
	// readFrom is the state folder a ReadMemory copy was read from, so
	// its messages name that file, not "this process only".
	readFrom string
	// seen is set once this process has read or written the state file:
	// from then on a missing file has vanished, and is never empty memory.
	seen atomic.Bool
	// remembered is set once this process read or wrote a state file that
	// held an id: from then on one that holds none was replaced or
	// emptied (a template, a reprovisioned file), never the truth.
	remembered atomic.Bool
	// last is the state this process last read or wrote: a later read that
	// lacks one of its ids or folder bindings, or holds a lower version,
	// is an older copy restored (or another process's forget), never a
	// change this process made, which it writes itself (lost).
	last atomic.Pointer[State]
	// preview makes every change judge as on the state file and write
	// nothing (PreviewMemory).
	preview bool
	// newestSeen is the highest write versions.lock named when this
	// process read it: a mark that later names less, or none, was
	// removed or restored, never written by egressd.
	newestSeen atomic.Uint64
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

// PreviewMemory returns the version memory in dir as one whose changes
// are judged, and fail, exactly as OpenMemory's would, with the same
// messages naming the state file, and are never written: "egressd
// approve" shows what an approval binds before it is made. It takes no
// lock and makes nothing (a lock file made without the state file beside
// it would read as a vanished state file); the approval that follows
// takes the lock and may still fail where only writing can.
func PreviewMemory(dir string) *Memory { return &Memory{dir: dir, preview: true} }

// InMemory returns a Memory that lives only as long as the process.
func InMemory() *Memory { return &Memory{mem: newState()} }

// ReadMemory returns an in-process copy of the version memory in dir: it
// judges as "serve" would at this moment and never writes the file. A
// missing state file reads as empty, but a missing folder is an error: a
// mistyped --state must not read as "nothing waits for approval".
func ReadMemory(dir string) (*Memory, error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		if err == nil {
			err = errors.New("not a folder")
		}
		return nil, fmt.Errorf("no version memory at %s (%v): egressd has loaded nothing with this --state", dir, err)
	}
	m := &Memory{dir: dir}
	s, err := m.Read()
	if err != nil {
		return nil, err
	}
	return &Memory{mem: &s, readFrom: dir}, nil
}

// NewWarning says, before anything is loaded, that version memory at m
// holds nothing: no state file yet, or one with no id. Every integration
// then loads as first seen, with whatever list its manifest has and no
// approval gate; that is right for a first install and silent ruin for a
// mistyped state_dir or a wiped disk, so serve and run say it once, on
// stderr and in the audit log. "" when m remembers something, or lives in
// the process.
func (m *Memory) NewWarning() string {
	if m == nil || m.dir == "" {
		return ""
	}
	s, err := m.Read()
	if err != nil || len(s.IDs) > 0 {
		return "" // a read error is reported by the load itself
	}
	what := "is new (no " + stateFile + " yet)"
	if _, err := os.Lstat(m.Path()); err == nil {
		what = "is empty (it remembers no integration)"
	}
	return fmt.Sprintf("version memory at %s %s: every integration loads as first seen, with the list its manifest has now and no approval gate; if egressd kept version memory elsewhere before (a mistyped state_dir or --state, a wiped or replaced disk), stop egressd and restore it", m.Path(), what)
}

// StatePath is the state file in the state directory dir.
func StatePath(dir string) string { return filepath.Join(dir, stateFile) }

// Path is the state file, or "" for a Memory that lives in the process.
func (m *Memory) Path() string {
	if m == nil || m.dir == "" {
		return ""
	}
	return StatePath(m.dir)
}

// where names the state file in messages ("version memory: " comes
// before it).
// commandDir is the folder the commands egressd prints name with --state:
// the memory's, or the one a read-only copy was read from (explain
// --state), so a pasted command acts on the memory that was read.
func (m *Memory) commandDir() string {
	if m.dir != "" {
		return m.dir
	}
	return m.readFrom
}

func (m *Memory) where() string {
	if p := m.Path(); p != "" {
		return p
	}
	if m.readFrom != "" {
		return StatePath(m.readFrom) + ", read only"
	}
	return "this process only"
}

// maxStateBytes bounds the state file: thousands of ids fit in a few
// hundred kilobytes.
const maxStateBytes = 32 << 20

// Read returns the whole state. It reads through internal/safefile: a
// named pipe or a device in place of the file fails at once instead of
// blocking every load. Writes replace the file by rename, so a
// read without the lock still sees one whole version of it. The state
// folder may be the service user's: a symlink there is refused, never
// followed.
func (m *Memory) Read() (State, error) {
	return m.read(m.lockExists(), false)
}

// read is Read; wroteHere says whether versions.lock was there before this
// process took it: egressd makes it with the first write and never
// removes it, so a state file missing beside it has vanished.
func (m *Memory) read(wroteHere, locked bool) (State, error) {
	if m.dir == "" {
		return m.mem.clone(), nil
	}
	// The newest write's mark, then the file, under the lock (shared if
	// this process does not hold it): what is read is one write's.
	newest, release, err := m.newest(locked)
	if err != nil {
		release()
		return State{}, err
	}
	data, err := safefile.ReadRegularNoFollow(m.Path(), maxStateBytes)
	release()
	if errors.Is(err, fs.ErrNotExist) {
		if err := m.vanished(wroteHere); err != nil {
			return State{}, err
		}
		return *newState(), nil
	}
	if err != nil {
		return State{}, fmt.Errorf("policy: state file: %w", err) // err names the file
	}
	s, err := DecodeState(data)
	if err != nil {
		// A corrupt state file must not reset version memory silently.
		return State{}, fmt.Errorf("policy: state file %s is corrupt (%v); restore it, or remove it deliberately (every integration's next load is then a first load)", m.Path(), err)
	}
	s.read = fileSum(data)
	m.seen.Store(true)
	if len(s.IDs) == 0 && m.remembered.Load() {
		return State{}, fmt.Errorf("policy: state file %s remembers no integration, but it held some when this process read it: it was replaced or emptied; the last good policy stays in force: restore it (after a deliberate \"egressd state forget\" of the last id, restart this process)", m.Path())
	}
	last := m.last.Load()
	descends := last != nil && last.read != "" && s.Writes > last.Writes && s.descendsFrom(last.Writes, last.read)
	if lost := m.lost(s, descends); lost != "" {
		return State{}, fmt.Errorf("policy: state file %s %s, as it did when this process read it: another process forgot it (egressd state forget), or an older copy was restored; the last good policy stays in force: after a forget, restart this process to take it; else restore the file", m.Path(), lost)
	}
	if older := m.older(s); older != "" {
		return State{}, fmt.Errorf("policy: state file %s %s; the last good policy stays in force", m.Path(), older)
	}
	if newest != nil && !s.descendsFrom(newest.Write, newest.SHA256) {
		return State{}, fmt.Errorf("policy: state file %s is not write %d of version memory, the newest egressd made (%s names it), nor written over it: an older copy was restored; restore the newest copy (or, to take this one deliberately, stop every egressd and remove %s)", m.Path(), newest.Write, lockFile, lockFile)
	}
	m.remember(s)
	return s, nil
}

// lost says what version memory held when this process last read or
// wrote it that s has lost, or "": an id (round 47: a backup restored
// under a running serve lacked it, and its widening loaded as a first
// load), a folder's binding (round 48: an id change then loaded as a
// new folder's), or a version (round 48: a lower version then loaded,
// with a host the later version had removed).
//
// descends says s was written over what this process last read (its
// lineage names that file): a folder's binding moved by an approved id
// change or claim is then another process's doing, whether or not this
// process read the change while it waited (round 56: an approval loaded
// by another process within KeepUp's second read as a lost binding, and
// serve refused every reload).
func (m *Memory) lost(s State, descends bool) string {
	last := m.last.Load()
	if last == nil {
		return ""
	}
	for _, id := range sortedKeys(last.IDs) {
		was, now := last.IDs[id], s.IDs[id]
		switch {
		case now.Version == "":
			return "no longer remembers " + id
		case allowlist.CompareVersions(now.Version, was.Version) < 0, allowlist.CompareVersions(now.Approved.Version, was.Approved.Version) < 0:
			return fmt.Sprintf("remembers %s at version %s (in force %s), lower than %s (in force %s)", id, now.Version, now.Approved.Version, was.Version, was.Approved.Version)
		}
	}
	for _, place := range sortedKeys(last.Folders) {
		was, now := last.Folders[place], s.Folders[place]
		if now.ID == was.ID || (now.ID == "" && was.ID == "") || movedByApproval(was, now, s) || (descends && now.ByApproval && now.ID != "") {
			continue
		}
		if was.ID == "" {
			return fmt.Sprintf("binds %s to %s, which only waited there", place, now.ID)
		}
		return fmt.Sprintf("no longer binds %s to %s", place, was.ID)
	}
	return ""
}

// movedByApproval reports whether now, a folder's binding in s, is the
// change that waited there (was), approved and loaded by another process
// sharing version memory (egressd run): bound by approval to the id that
// waited, whose record in s is at the version and list that waited
// (round 49: serve refused every reload after it). Any other move is
// not, whatever the file says of it: round 50's older copy bound the
// folder "by approval" to an id no change waited for, and round 51's to
// the id that waited, but at an older version and list of it.
func movedByApproval(was, now Folder, s State) bool {
	p := was.Pending
	if p == nil || !now.ByApproval || now.ID != p.ID {
		return false
	}
	r := s.IDs[now.ID]
	return r.Version == p.Version && r.Digest == p.Digest
}

// remember notes s as what version memory holds now.
func (m *Memory) remember(s State) {
	if len(s.IDs) > 0 {
		m.remembered.Store(true)
	}
	c := s.clone()
	c.read = s.read
	// Reads may run together (a reload's and KeepUp's): the newest write
	// seen stays, or a restored copy of an older one would pass as seen.
	for {
		old := m.last.Load()
		if old != nil && old.Writes > c.Writes || m.last.CompareAndSwap(old, &c) {
			return
		}
	}
}

// vanished says why a missing state file is not empty memory: a missing
// file read as empty turns every pending widening, and any new one, into a
// first load, silently.
func (m *Memory) vanished(wroteHere bool) error {
	switch {
	case m.seen.Load():
		return fmt.Errorf("policy: state file %s has vanished since this process read it; the last good policy stays in force: restore the file (egressd never reads missing version memory as empty)", m.Path())
	case wroteHere:
		return fmt.Errorf("policy: state file %s is missing, but %s shows egressd kept version memory here: restore the file, or remove both deliberately (every integration's next load is then a first load)", m.Path(), filepath.Join(m.dir, lockFile))
	}
	return nil
}

func (m *Memory) lockExists() bool {
	_, err := os.Lstat(filepath.Join(m.dir, lockFile))
	return err == nil
}

// update runs fn on the whole state under an exclusive lock, and saves it
// if fn returns nil and changed something. Several egressd processes may
// share one state directory; the lock serialises them.
func (m *Memory) update(fn func(s *State) error) error {
	if m.dir == "" {
		s := m.mem.clone()
		if err := fn(&s); err != nil {
			return err
		}
		*m.mem = s
		return nil
	}
	if m.preview {
		if _, err := os.Stat(m.dir); err == nil {
			if err := m.mayChange(); err != nil {
				return err
			}
		}
		s, err := m.Read()
		if err != nil {
			return err
		}
		return fn(&s)
	}
	wroteHere := m.lockExists()
	lockFile, unlock, err := m.lock()
	if err != nil {
		return err
	}
	defer unlock()
	s, err := m.read(wroteHere, true)
	if err != nil {
		return err
	}
	before := s.encode()
	if !wroteHere && !m.seen.Load() {
		// The lock is new: write the file beside it at once, so that a
		// lock without a state file always means the file vanished.
		if err := m.write(before); err != nil {
			return err
		}
		s.read = fileSum(before)
	}
	if err := fn(&s); err != nil {
		return err
	}
	if string(before) == string(s.encode()) {
		return nil // nothing changed: skip the write and its fsync
	}
	s.written()
	data := s.encode()
	if err := m.write(data); err != nil {
		return err
	}
	s.read = fileSum(data)
	if err := writeNewest(lockFile, WriteMark{Write: s.Writes, SHA256: s.read}); err != nil {
		return fmt.Errorf("policy: state lock: %w", err)
	}
	m.remember(s)
	return nil
}

// owner is who the state must stay readable by: the state file's owner and
// mode if it exists, else the directory's owner with mode 0600. "egressd
// approve" run as root must not leave a file the service cannot read.
func (m *Memory) owner() (uid, gid int, mode fs.FileMode, err error) {
	st, err := os.Lstat(m.Path())
	if err == nil && !st.Mode().IsRegular() { // a symlink's owner and mode are no model
		return 0, 0, 0, fmt.Errorf("policy: state file %s is not a regular file (%s); egressd does not follow it: remove it, or restore the real file", m.Path(), st.Mode().Type())
	}
	mode = st0600(st, err)
	if errors.Is(err, fs.ErrNotExist) {
		st, err = os.Stat(m.dir)
	}
	if err != nil {
		return 0, 0, 0, fmt.Errorf("policy: state: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return os.Getuid(), os.Getgid(), mode, nil
	}
	return int(sys.Uid), int(sys.Gid), mode, nil
}

// st0600 is the mode to keep: the file's, without write bits for group
// and others (the service user could chmod its file 0666 before root
// rewrites it) or any execute bit; 0600 for a new file.
func st0600(st fs.FileInfo, err error) fs.FileMode {
	if err != nil {
		return 0o600
	}
	return st.Mode().Perm() & 0o644
}

// keepOwner gives f, which will be path, the state's owner and mode (see
// owner), or says why it cannot: a state file the service cannot read is a
// service that cannot start.
func (m *Memory) keepOwner(f *os.File, path string) error {
	uid, gid, mode, err := m.owner()
	if err != nil {
		return err
	}
	// Only root makes files for another user; lock refuses anyone else
	// whose uid is not the state's.
	if os.Geteuid() == 0 && (uid != 0 || gid != os.Getegid()) {
		if err := f.Chown(uid, gid); err != nil {
			return fmt.Errorf("policy: version memory %s belongs to uid %d gid %d, and this process (uid %d) cannot give %s to them (%v); run this as uid %d or as root", m.Path(), uid, gid, os.Geteuid(), path, err, uid)
		}
	}
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("policy: state: %w", err)
	}
	return nil
}

// mayChange says why this process cannot change the state file and keep
// it its owner's: only root or that owner can.
func (m *Memory) mayChange() error {
	uid, _, _, err := m.owner()
	if err != nil {
		return err
	}
	if me := os.Geteuid(); me != 0 && me != uid {
		return fmt.Errorf("policy: version memory %s belongs to uid %d, and this process runs as uid %d: it cannot change the file and keep it theirs; run this as uid %d or as root (or, if this user should own version memory, chown it to this user)", m.Path(), uid, me, uid)
	}
	return nil
}

func (m *Memory) lock() (*os.File, func(), error) {
	if err := m.mayChange(); err != nil {
		return nil, nil, err
	}
	path := filepath.Join(m.dir, lockFile)
	// The folder may be the service user's, who could put a symlink or a
	// hard link to any file here: keepOwner would then chown that file.
	f, err := safefile.OpenPrivate(path, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("policy: state lock: %w", err)
	}
	if err := m.keepOwner(f, path); err != nil {
		f.Close()
		return nil, nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("policy: state lock: %w", err)
	}
	return f, func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

// write replaces the state file atomically (write, fsync, rename), keeping
// its owner and mode.
func (m *Memory) write(data []byte) error {
	tmp, err := os.CreateTemp(m.dir, stateFile+".*")
	if err != nil {
		return fmt.Errorf("policy: state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := m.keepOwner(tmp, m.Path()); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
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
	if err := os.Rename(tmp.Name(), m.Path()); err != nil {
		return fmt.Errorf("policy: state: %w", err)
	}
	m.seen.Store(true)
	return nil
}
