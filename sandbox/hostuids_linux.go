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
// one a host account has, or, when new to key, one a process runs as.
func pickHostUID(r *hostUIDs, key string, mine int, taken map[int]bool) (int, error) {
	free := func(uid int, checkProcs bool) (bool, error) {
		if _, held := r.heldByOther(uid, key); held || taken[uid] {
			return false, nil
		}
		if acct, err := hostAccount(uid); acct || err != nil {
			return false, err
		}
		if !checkProcs {
			return true, nil
		}
		running, err := processesRunAs()
		return !running[uid], err
	}
	inRange := func(uid int) bool { return uid >= stateUIDBase && uid < stateUIDBase+stateUIDSpan }
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
	running, err := processesRunAs()
	if err != nil {
		return 0, err
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	start := int(h.Sum32() % stateUIDSpan)
	for i := 0; i < stateUIDSpan; i++ {
		uid := stateUIDBase + (start+i)%stateUIDSpan
		if _, held := r.heldByOther(uid, key); held || taken[uid] || running[uid] {
			continue
		}
		acct, err := hostAccount(uid)
		if err != nil {
			return 0, err
		}
		if !acct {
			return uid, nil
		}
	}
	return 0, fmt.Errorf("no free sandbox uid in [%d, %d): each is held by another integration, a host account or a running process", stateUIDBase, stateUIDBase+stateUIDSpan)
}

// hostAccount reports whether uid is a host account's or a host group's
// (os/user: /etc/passwd and /etc/group; and NSS through getent, which the
// release build, without cgo, sees only that way: LDAP, SSSD,
// systemd-homed accounts), or one
// the admin delegated to a user as a subordinate id (/etc/subuid, and
// /etc/subgid, since the sandbox's gid is its uid): that user can map it
// in a user namespace of their own and signal the sandbox as it.
func hostAccount(uid int) (bool, error) {
	if sub, err := delegated(uid); sub || err != nil {
		return sub, err
	}
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

// parseULong reads a number as shadow-utils' newuidmap does (strtoul with
// base 0, the whole field): leading blanks, "0x" hex, a leading 0 for
// octal, else decimal. A parser stricter than newuidmap's would miss a
// delegation newuidmap honours ("a12u:0x7805af25:1").
func parseULong(field string) (uint64, bool) {
	f := strings.TrimLeft(field, " \t\n\v\f\r")
	neg := strings.HasPrefix(f, "-") // strtoul negates in unsigned arithmetic: "-N" is 2^64-N
	f = strings.TrimPrefix(strings.TrimPrefix(f, "+"), "-")
	base := 10
	switch {
	case len(f) > 2 && (f[:2] == "0x" || f[:2] == "0X"):
		f, base = f[2:], 16
	case len(f) > 1 && f[0] == '0':
		f, base = f[1:], 8
	}
	if f == "" || strings.ContainsAny(f, "_+-") {
		return 0, false
	}
	n, err := strconv.ParseUint(f, base, 64)
	if neg {
		n = -n
	}
	return n, err == nil
}

// subordinateFiles are where the admin delegates id ranges to users
// (shadow-utils' newuidmap and newgidmap read them).
var subordinateFiles = []string{"/etc/subuid", "/etc/subgid"}

// delegated reports whether id lies in a range subordinateFiles delegate
// ("name:start:count" lines). A missing file delegates nothing; one that
// cannot be read fails closed.
func delegated(id int) (bool, error) {
	for _, path := range subordinateFiles {
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("read %s: %w", path, err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Split(strings.TrimSpace(line), ":")
			if len(f) < 3 { // shadow reads the first three fields and ignores the rest
				continue
			}
			start, ok1 := parseULong(f[1])
			count, ok2 := parseULong(f[2])
			if ok1 && ok2 && uint64(id) >= start && uint64(id)-start < count {
				return true, nil
			}
		}
	}
	return false, nil
}

// processesRunAs returns every uid and gid (real, effective, saved,
// filesystem) some process on the host runs as, from /proc. A process that exits
// while it is read is skipped.
func processesRunAs() (map[int]bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	uids := map[int]bool{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue // gone
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			rest, ok := strings.CutPrefix(sc.Text(), "Uid:")
			if !ok {
				rest, ok = strings.CutPrefix(sc.Text(), "Gid:") // the sandbox's gid is its uid
			}
			if !ok {
				rest, ok = strings.CutPrefix(sc.Text(), "Groups:") // supplementary groups too
			}
			if !ok {
				continue
			}
			for _, f := range strings.Fields(rest) {
				if n, err := strconv.Atoi(f); err == nil {
					uids[n] = true
				}
			}
		}
	}
	return uids, nil
}
