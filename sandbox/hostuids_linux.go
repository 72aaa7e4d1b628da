package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/egressd/egressd/internal/safefile"
	"golang.org/x/sys/unix"
)

// hostUIDFolder holds the host-wide record of which integration key holds
// which sandbox uid. It is fixed, not under --state: the uid is a host
// resource, and two runs with two state folders must still see each
// other's claims. Tests point it at a temporary folder.
var hostUIDFolder = "/var/lib/egressd/host-uids"

const (
	hostUIDFile    = "owners.json"
	hostUIDMaxSize = 64 << 20
)

// hostUIDs is the record, held under the lock of its folder.
type hostUIDs struct {
	dir    *os.File
	owners map[string]hostUID // by integration key
}

// hostUID is what the record keeps for a key: its uid and the state folder
// it last claimed. An entry whose folder is gone is dropped when the
// record is read (the state it guarded is gone; the uid's processes, if
// any still run, keep it from being given again), so folders that tests
// and retired integrations leave behind do not hold uids for ever.
type hostUID struct {
	UID    int    `json:"uid"`
	Folder string `json:"folder"`
}

// openHostUIDs makes (root-owned, 0700, never through a symlink) and locks
// the record's folder and reads the record; a missing record is empty.
func openHostUIDs() (*hostUIDs, error) {
	dir, err := lockedFolder(hostUIDFolder)
	if err != nil {
		return nil, err
	}
	r := &hostUIDs{dir: dir, owners: map[string]hostUID{}}
	path := filepath.Join(hostUIDFolder, hostUIDFile)
	data, err := safefile.ReadRegularAt(dir, hostUIDFile, path, hostUIDMaxSize)
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err == nil {
		err = json.Unmarshal(data, &r.owners)
	}
	if err != nil {
		dir.Close()
		return nil, fmt.Errorf("sandbox uid record %s: %w (egressd cannot tell which uids other integrations hold; fix or remove it: the state folders' owners rebuild it)", path, err)
	}
	for key, e := range r.owners {
		if _, err := os.Lstat(e.Folder); errors.Is(err, os.ErrNotExist) {
			delete(r.owners, key)
		}
	}
	return r, nil
}

// heldByOther reports the key other than key that holds uid, if any.
func (r *hostUIDs) heldByOther(uid int, key string) (string, bool) {
	for k, e := range r.owners {
		if e.UID == uid && k != key {
			return k, true
		}
	}
	return "", false
}

// save writes the record with key holding uid for folder: a new file
// renamed over the old, so a crash leaves either record whole.
func (r *hostUIDs) save(key string, uid int, folder string) error {
	e := hostUID{UID: uid, Folder: folder}
	if r.owners[key] == e {
		return nil
	}
	r.owners[key] = e
	data, err := json.Marshal(r.owners)
	if err != nil {
		return err
	}
	at := int(r.dir.Fd())
	const tmp = hostUIDFile + ".new"
	unix.Unlinkat(at, tmp, 0)
	fd, err := unix.Openat(at, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "create", Path: filepath.Join(hostUIDFolder, tmp), Err: err}
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(data)
	err = errors.Join(err, f.Sync(), f.Close())
	if err == nil {
		err = unix.Renameat(at, tmp, at, hostUIDFile)
	}
	if err != nil {
		return fmt.Errorf("sandbox uid record %s: %w", hostUIDFolder, err)
	}
	return nil
}

func (r *hostUIDs) Close() error { return r.dir.Close() }

// pickHostUID returns the uid key's sandboxes run as, recorded host-wide:
// the one the record gives key; else the one key's folder is owned by
// (mine, the evidence when the record was lost) if no other key holds it;
// else a fresh one derived from key. A uid is never one another key
// holds, one another folder in the same state folder is owned by (taken),
// one a host account has, one delegated to a user or mapped by a user
// namespace (both let a user become it), or, when new to key, one a
// process runs as or a user namespace maps alone (key's own sandboxes do).
func pickHostUID(r *hostUIDs, key string, mine int, taken map[int]bool) (int, error) {
	if err := subidsFromFilesOnly(); err != nil {
		return 0, err
	}
	blocked, err := subordinateRanges()
	if err != nil {
		return 0, err
	}
	live, err := readLiveIDs()
	if err != nil {
		return 0, err
	}
	blocked = append(blocked, live.mapped...)
	free := func(uid int, checkRunning bool) (bool, error) {
		if _, held := r.heldByOther(uid, key); held || taken[uid] {
			return false, nil
		}
		if _, in := blocked.holding(uid); in || checkRunning && live.running[uid] {
			return false, nil
		}
		acct, err := hostAccount(uid)
		return !acct, err
	}
	const end = stateUIDBase + stateUIDSpan
	inRange := func(uid int) bool { return uid >= stateUIDBase && uid < end }
	if uid := r.owners[key].UID; inRange(uid) {
		if ok, err := free(uid, false); ok || err != nil {
			return uid, err // its own runs may be running as it
		}
	}
	if inRange(mine) {
		if ok, err := free(mine, true); ok || err != nil {
			return mine, err
		}
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	start := int(h.Sum32() % stateUIDSpan)
	for i := 0; i < stateUIDSpan; i++ {
		uid := stateUIDBase + (start+i)%stateUIDSpan
		if rg, in := blocked.holding(uid); in { // skip the rest of the range at once
			i += int(min(rg.end, end)-uint64(uid)) - 1
			continue
		}
		ok, err := free(uid, true)
		if err != nil {
			return 0, err
		}
		if ok {
			return uid, nil
		}
	}
	return 0, fmt.Errorf("no free sandbox uid in [%d, %d): each is held by another integration, a host account, a user's subordinate ids, a user namespace or a running process", stateUIDBase, end)
}

// hostAccount reports whether uid is a host account's or a host group's
// (os/user: /etc/passwd and /etc/group; and NSS through getent, which the
// release build, without cgo, sees only that way: LDAP, SSSD,
// systemd-homed accounts). Subordinate ids (/etc/subuid, /etc/subgid)
// are pickHostUID's subordinateRanges.
func hostAccount(uid int) (bool, error) {
	// The sandbox's gid is its uid: a host group with that gid would give
	// the program that group's files.
	_, err := user.LookupGroupId(strconv.Itoa(uid))
	var unknownGroup user.UnknownGroupIdError
	switch {
	case err == nil:
		return true, nil
	case !errors.As(err, &unknownGroup):
		return false, fmt.Errorf("look up gid %d: %w", uid, err)
	}
	if primary, err := primaryGroupOfAnAccount(uid); primary || err != nil {
		return primary, err
	}
	_, err = user.LookupId(strconv.Itoa(uid))
	var unknown user.UnknownUserIdError
	switch {
	case err == nil:
		return true, nil
	case !errors.As(err, &unknown):
		return false, fmt.Errorf("look up uid %d: %w", uid, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), getentTimeout)
	defer cancel()
	for _, db := range []string{"passwd", "group"} {
		if known, err := nssKnows(ctx, db, uid); known || err != nil {
			return known, err
		}
	}
	return false, nil
}

// passwdFile is where accounts are listed; tests point it elsewhere.
var passwdFile = "/etc/passwd"

// primaryGroupOfAnAccount reports whether an account in passwdFile has gid
// as its primary group (the sandbox's gid is its uid): such an account
// runs with that gid though no group of it exists. An account only NSS
// serves is not listed there (a residual the README names).
func primaryGroupOfAnAccount(gid int) (bool, error) {
	data, err := os.ReadFile(passwdFile)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", passwdFile, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Split(line, ":"); len(f) >= 4 {
			if n, ok := parseDecimalID(f[3]); ok && n == uint32(gid) {
				return true, nil
			}
		}
	}
	return false, nil
}

// parseDecimalID reads an id field as glibc's files parser does (strtoul,
// base 10, into a 32-bit id): leading blanks, a sign, leading zeros
// ("02002567354" is 2002567354), and a negative wraps.
func parseDecimalID(field string) (uint32, bool) {
	f := strings.TrimLeft(field, " \t\n\v\f\r")
	neg := strings.HasPrefix(f, "-")
	f = strings.TrimPrefix(strings.TrimPrefix(f, "+"), "-")
	if f == "" || strings.Trim(f, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(f, 10, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		n = -n
	}
	return uint32(n), true
}

// getentPaths are where getent is looked for: the C library's, which asks
// every NSS source the host configures. A host without it has only the
// files os/user reads.
var getentPaths = []string{"/usr/bin/getent", "/bin/getent"}

// getentTimeout bounds the NSS lookups of one uid: a directory server that
// does not answer fails the pick rather than hanging the run.
const getentTimeout = 10 * time.Second

// nssKnows reports whether getent finds id in db (passwd or group). Exit 2
// is "not found"; any other failure fails closed.
func nssKnows(ctx context.Context, db string, id int) (bool, error) {
	for _, path := range getentPaths {
		if _, err := os.Stat(path); err != nil {
			continue
		}
		cmd := exec.CommandContext(ctx, path, db, strconv.Itoa(id))
		cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return true, nil
		case errors.As(err, &exit) && exit.ExitCode() == 2:
			return false, nil
		default:
			return false, fmt.Errorf("getent %s %d (is it an account NSS serves?): %w", db, id, err)
		}
	}
	return false, nil
}

// liveIDs are the host ids running processes hold.
type liveIDs struct {
	// running: every uid and gid (real, effective, saved, filesystem,
	// supplementary) a process runs as, and every id a user namespace
	// maps alone (as egressd's own sandboxes map theirs).
	running map[int]bool
	// mapped: every range of more than one id a user namespace maps. Its
	// root, unprivileged on the host, can setresuid to any of them.
	mapped idRanges
}

// procRoot is where readLiveIDs reads the host's processes. Tests point
// it at a folder they build.
var procRoot = "/proc"

// readLiveIDs reads liveIDs from procRoot. A process that exits while it
// is read is skipped; one that cannot be read otherwise fails the read
// closed, since the ids it holds are then unknown. The ids of uid_map and
// gid_map are, read from another namespace, in the reader's own; the
// initial namespace's identity map is no user namespace's.
func readLiveIDs() (liveIDs, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return liveIDs{}, err
	}
	live := liveIDs{running: map[int]bool{}}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		dir := filepath.Join(procRoot, e.Name())
		// Credentials are per thread: a server that switches ids on one
		// thread (Samba, nfs-ganesha) shows its leader's in PID/status.
		files := []string{"status", "uid_map", "gid_map"} // gid_map: the sandbox's gid is its uid
		tasks, err := os.ReadDir(filepath.Join(dir, "task"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ESRCH) {
			return liveIDs{}, fmt.Errorf("%w (egressd cannot tell which ids that process's threads hold)", err)
		}
		for _, task := range tasks {
			files = append(files, filepath.Join("task", task.Name(), "status"))
		}
		for _, name := range files {
			data, err := os.ReadFile(filepath.Join(dir, name))
			switch {
			case errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) || errors.Is(err, unix.EINVAL):
				continue // gone (reaped between the listing and the open: ENOENT, ESRCH; EINVAL from a map's open)
			case err != nil:
				return liveIDs{}, fmt.Errorf("%w (egressd cannot tell which ids that process holds)", err)
			case filepath.Base(name) == "status":
				readStatusIDs(data, live.running)
			default:
				live.readMap(data)
			}
		}
	}
	return live, nil
}

// readStatusIDs adds to ids the Uid, Gid and Groups of a /proc/PID/status.
func readStatusIDs(status []byte, ids map[int]bool) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Uid:")
		if !ok {
			rest, ok = strings.CutPrefix(sc.Text(), "Gid:")
		}
		if !ok {
			rest, ok = strings.CutPrefix(sc.Text(), "Groups:")
		}
		if !ok {
			continue
		}
		for _, f := range strings.Fields(rest) {
			if n, err := strconv.Atoi(f); err == nil {
				ids[n] = true
			}
		}
	}
}

// readMap adds a uid_map or gid_map ("inside outside count" lines), judged
// whole: a namespace that maps one id alone (as egressd's own sandboxes
// map theirs) holds it like a running process; one that maps more, in
// one line or in several one-id lines, lets its root setresuid to each.
func (l *liveIDs) readMap(data []byte) {
	var ranges idRanges
	var total uint64
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		var n [3]uint64
		for i := range f {
			n[i], _ = strconv.ParseUint(f[i], 10, 32)
		}
		inside, outside, count := n[0], n[1], n[2]
		if inside == 0 && outside == 0 && count == 1<<32-1 { // the initial namespace
			continue
		}
		if count > 0 {
			ranges = append(ranges, rangeOf(outside, count))
			total += count
		}
	}
	switch {
	case total == 1:
		l.running[int(ranges[0].start)] = true
	case total > 1:
		l.mapped = append(l.mapped, ranges...)
	}
}
