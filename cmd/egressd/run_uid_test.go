package main

import (
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// sandboxUIDOf is the uid a key derives: 2,000,000,000 + FNV-32a mod 2^24.
func sandboxUIDOf(key string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	return 2_000_000_000 + h.Sum32()%(1<<24)
}

// collidingID finds, as the attacker did, an id whose state name in the
// manifest file's place derives the same uid as victim's state name.
// FNV-1a's step is (h^b)*prime, invertible, so the state the id's last
// byte must meet is computed back from the target, and only the id's
// middle is brute-forced (some 10^5 tries).
func collidingID(t *testing.T, victimKey, manifestFile string) string {
	const prime, offset, mask = 16777619, 2166136261, 1<<24 - 1
	inv := uint32(1) // prime^-1 mod 2^32 by Newton's iteration
	for i := 0; i < 5; i++ {
		inv *= 2 - prime*inv
	}
	tail := strings.TrimPrefix(stateName("x", manifestFile), "x") // "@HASH"
	want := sandboxUIDOf(victimKey) - 2_000_000_000
	for i := len(tail) - 1; i >= 0; i-- {
		want = (want * inv) ^ uint32(tail[i])
	}
	want = (want * inv) & mask
	for n := 0; n < 1<<24; n++ {
		prefix := "com.test.atk" + strconv.Itoa(n)
		h := uint32(offset)
		for i := 0; i < len(prefix); i++ {
			h = (h ^ uint32(prefix[i])) * prime
		}
		if b := (h ^ want) & mask; b >= 'a' && b <= 'z' {
			id := prefix + string(rune(b))
			if sandboxUIDOf(stateName(id, manifestFile)) != sandboxUIDOf(victimKey) {
				t.Fatalf("collision arithmetic wrong for %q", id)
			}
			return id
		}
	}
	t.Fatal("no colliding id")
	return ""
}

// hostUIDInside is the script that prints the host uid the sandbox's
// program runs as: the outside column of its user namespace's map.
const hostUIDInside = `read inside outside count < /proc/self/uid_map && echo $outside`

// TestRunTwoIntegrationsWhoseIDsHashToOneUIDUnderTwoStateFoldersGetTwoUIDs:
// the attacker's manifest claims an id brute-forced so that its state
// name derives the victim's uid, and runs under another --state, where the
// per-folder check never saw the victim's folder: on main both sandboxes
// ran as one host uid, and the attacker's descriptors in flight made the
// victim's SCM_RIGHTS sends fail ETOOMANYREFS. Now the host-wide record
// gives the attacker another uid, and the victim keeps its own.
func TestRunTwoIntegrationsWhoseIDsHashToOneUIDUnderTwoStateFoldersGetTwoUIDs(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the per-integration uid is root's: run the tests as root")
		}
		t.Skip("the per-integration uid is root's")
	}
	victim, attacker := newSandboxEnv(t), newSandboxEnv(t)
	manifest := filepath.Join(attacker.dir, "voiceos.integration.json")
	id := collidingID(t, stateName("com.test.sandboxed", filepath.Join(victim.dir, "voiceos.integration.json")), manifest)
	data, _ := os.ReadFile(manifest)
	os.WriteFile(manifest, []byte(strings.Replace(string(data), "com.test.sandboxed", id, 1)), 0o644)
	runAs := func(e *sandboxEnv, who string) uint32 {
		t.Helper()
		out, errs, code := e.run(hostUIDInside)
		n, err := strconv.ParseUint(strings.TrimSpace(out), 10, 32)
		if code != 0 || err != nil {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q", who, code, out, errs)
		}
		return uint32(n)
	}
	owner := func(dir string) uint32 {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(dir, &st); err != nil {
			t.Fatal(err)
		}
		return st.Uid
	}
	v := runAs(victim, "victim")
	a := runAs(attacker, "attacker")
	if a == v {
		t.Fatalf("the attacker %s under another --state runs as the victim's host uid %d", id, v)
	}
	if got := owner(victim.stateFolder("com.test.sandboxed")); got != v {
		t.Errorf("victim's state folder owned by %d, runs as %d", got, v)
	}
	if got := owner(attacker.stateFolder(id)); got != a {
		t.Errorf("attacker's state folder owned by %d, runs as %d", got, a)
	}
	if again := runAs(victim, "victim, again"); again != v {
		t.Errorf("victim's second run as %d, first as %d", again, v)
	}
}
