//go:build linux

package sandbox

import (
	"context"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// useTempHostUIDRecord points the host-wide uid record at a folder the
// test owns, so a test never writes the host's.
func useTempHostUIDRecord(t *testing.T) {
	t.Helper()
	old := hostUIDFolder
	hostUIDFolder = filepath.Join(t.TempDir(), "host-uids")
	t.Cleanup(func() { hostUIDFolder = old })
}

func stateUIDOf(name string) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	return stateUIDBase + int(h.Sum32()%stateUIDSpan)
}

// collidingKey finds, as the attacker did, an integration key whose
// derived uid is victim's. FNV-1a's last step is (h^b)*prime, invertible,
// so only the key's middle (16 bits' worth) is brute-forced.
func collidingKey(t *testing.T, victim string) string {
	const prime, offset = 16777619, 2166136261
	inv := uint32(1) // prime^-1 mod 2^32 by Newton's iteration
	for i := 0; i < 5; i++ {
		inv *= 2 - prime*inv
	}
	tail := "@0123456789abcdef"
	want := uint32(stateUIDOf(victim) - stateUIDBase)
	for i := len(tail) - 1; i >= 0; i-- { // the state before the tail
		want = (want * inv) ^ uint32(tail[i])
	}
	want = (want * inv) & (stateUIDSpan - 1) // the state before the last id byte, xor that byte
	for n := 0; n < 1<<24; n++ {
		prefix := "com.attacker." + strconv.Itoa(n)
		h := uint32(offset)
		for i := 0; i < len(prefix); i++ {
			h = (h ^ uint32(prefix[i])) * prime
		}
		b := (h ^ want) & (stateUIDSpan - 1)
		if b >= 'a' && b <= 'z' {
			key := prefix + string(rune(b)) + tail
			if stateUIDOf(key) != stateUIDOf(victim) {
				t.Fatalf("collision arithmetic wrong for %q", key)
			}
			return key
		}
	}
	t.Fatal("no colliding key found")
	return ""
}

// TestTwoIntegrationsWhoseIDsHashToOneUIDUnderTwoStateFoldersGetTwoUIDs:
// the attacker brute-forces an id whose uid is the victim's and runs it
// under another --state, so the per-folder check never sees the victim's
// folder. Sharing the host uid would let it take the victim's per-uid
// kernel quotas (in-flight descriptors) and signal or ptrace it. The
// host-wide record gives it another uid, the victim keeps its own across
// runs, and each sandbox really runs as its folder's owner.
func TestTwoIntegrationsWhoseIDsHashToOneUIDUnderTwoStateFoldersGetTwoUIDs(t *testing.T) {
	needsRoot(t, "sandbox uids are only chosen for root's runs")
	useTempHostUIDRecord(t)
	victim := StateName("com.acme.victim", "/srv/victim")
	attacker := collidingKey(t, victim)
	s1, s2 := t.TempDir(), t.TempDir()
	vdir, vuid, err := ClaimStateFolder(s1, victim, "")
	if err != nil {
		t.Fatal(err)
	}
	adir, auid, err := ClaimStateFolder(s2, attacker, "")
	if err != nil {
		t.Fatal(err)
	}
	if vuid != stateUIDOf(victim) {
		t.Errorf("victim got uid %d, want its derived %d", vuid, stateUIDOf(victim))
	}
	if auid == vuid {
		t.Fatalf("attacker %q under another state folder shares the victim's uid %d", attacker, vuid)
	}
	for dir, want := range map[string]int{vdir: vuid, adir: auid} {
		if got := ownerOf(t, dir); got != want {
			t.Errorf("%s owned by %d, want %d", dir, got, want)
		}
		if got := runAsOwner(t, dir); got != want {
			t.Errorf("a program run as %s's owner runs as %d, want %d", dir, got, want)
		}
	}
	// Again, in the other order: each key keeps its uid.
	if _, again, err := ClaimStateFolder(s2, attacker, ""); err != nil || again != auid {
		t.Errorf("attacker's second run: uid %d, %v; want %d", again, err, auid)
	}
	if _, again, err := ClaimStateFolder(s1, victim, ""); err != nil || again != vuid {
		t.Errorf("victim's second run: uid %d, %v; want %d", again, err, vuid)
	}
}

// TestALostUIDRecordIsRebuiltFromTheStateFoldersOwners: with the record
// gone, the victim's folder owner is the evidence of its uid; an attacker
// whose folder an earlier egressd gave the same uid cannot take it while
// the record says the victim holds it.
func TestALostUIDRecordIsRebuiltFromTheStateFoldersOwners(t *testing.T) {
	needsRoot(t, "sandbox uids are only chosen for root's runs")
	useTempHostUIDRecord(t)
	victim := StateName("com.acme.victim", "/srv/victim")
	s1, s2 := t.TempDir(), t.TempDir()
	_, vuid, err := ClaimStateFolder(s1, victim, "")
	if err != nil {
		t.Fatal(err)
	}
	attacker := "com.attacker@0123456789abcdef"
	os.Mkdir(filepath.Join(s2, attacker), 0o700) // as an earlier egressd left it
	os.Chown(filepath.Join(s2, attacker), vuid, vuid)
	if err := os.RemoveAll(hostUIDFolder); err != nil {
		t.Fatal(err)
	}
	if _, again, err := ClaimStateFolder(s1, victim, ""); err != nil || again != vuid {
		t.Fatalf("victim after the record was lost: uid %d, %v; want %d", again, err, vuid)
	}
	adir, auid, err := ClaimStateFolder(s2, attacker, "")
	if err != nil || auid == vuid {
		t.Fatalf("attacker with a folder owned by the victim's uid got %d, %v", auid, err)
	}
	if got := ownerOf(t, adir); got != auid {
		t.Errorf("attacker's folder owned by %d, want %d", got, auid)
	}
}

// TestASandboxUIDIsNeverAHostAccountsOrARunningProcesss: a uid in the
// range that a host account has, or a process runs as, is skipped.
func TestASandboxUIDIsNeverAHostAccountsOrARunningProcesss(t *testing.T) {
	needsRoot(t, "sandbox uids are only chosen for root's runs")
	useTempHostUIDRecord(t)
	key := StateName("com.acme.busy", "/srv/busy")
	busy := stateUIDOf(key)
	cmd := exec.Command("sleep", "infinity")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(busy), Gid: uint32(busy)}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitRunningAs(t, cmd.Process.Pid, busy)
	_, uid, err := ClaimStateFolder(t.TempDir(), key, "")
	if err != nil {
		t.Fatal(err)
	}
	if uid == busy {
		t.Errorf("got uid %d, which process %d runs as", uid, cmd.Process.Pid)
	}
	if acct, err := hostAccount(0); !acct || err != nil {
		t.Errorf("hostAccount(0) = %v, %v: root is a host account", acct, err)
	}
}

func ownerOf(t *testing.T, path string) int {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Uid)
}

// runAsOwner runs id -u as the folder's owner, as egressd runs a sandbox.
func runAsOwner(t *testing.T, dir string) int {
	t.Helper()
	uid := ownerOf(t, dir)
	cmd := exec.Command("id", "-u")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}

// waitRunningAs waits until /proc shows pid with uid (after exec's setuid).
func waitRunningAs(t *testing.T, pid, uid int) {
	t.Helper()
	for {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "Uid:\t"+strconv.Itoa(uid)+"\t") {
			return
		}
		syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
	}
}

// TestAUIDRecordForgetsAKeyWhoseStateFolderIsGone: the record does not
// grow for ever with integrations (and tests) whose state was removed; the
// uid is free again once nothing runs as it.
func TestAUIDRecordForgetsAKeyWhoseStateFolderIsGone(t *testing.T) {
	needsRoot(t, "sandbox uids are only chosen for root's runs")
	useTempHostUIDRecord(t)
	gone := StateName("com.acme.retired", "/srv/retired")
	s1 := t.TempDir()
	dir, uid, err := ClaimStateFolder(s1, gone, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	next := collidingKey(t, gone)
	if _, got, err := ClaimStateFolder(t.TempDir(), next, ""); err != nil || got != uid {
		t.Errorf("after %s was removed, a key deriving its uid got %d, %v; want %d", dir, got, err, uid)
	}
	r, err := openHostUIDs()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, ok := r.owners[gone]; ok {
		t.Errorf("the record still holds %s", gone)
	}
}

// TestADamagedUIDRecordRefusesTheRunWithOneLine: a record egressd cannot
// read never lets it give a uid blind to the other integrations' claims.
func TestADamagedUIDRecordRefusesTheRunWithOneLine(t *testing.T) {
	needsRoot(t, "sandbox uids are only chosen for root's runs")
	useTempHostUIDRecord(t)
	if err := os.MkdirAll(hostUIDFolder, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(hostUIDFolder, hostUIDFile), []byte(`{"com.x@00":`), 0o600)
	_, uid, err := ClaimStateFolder(t.TempDir(), StateName("com.acme.victim", "/srv/victim"), "")
	if err == nil || !strings.Contains(err.Error(), "sandbox uid record "+filepath.Join(hostUIDFolder, hostUIDFile)) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("uid %d, error %v; want one line naming the record", uid, err)
	}
}

// TestASandboxUIDIsNeverOneDelegatedToAUserAsSubordinate: a root sandbox's
// uid was checked against host accounts and running processes only; a uid
// the admin had delegated to a user in /etc/subuid (or a gid in
// /etc/subgid) let that user map it in a user namespace of their own and,
// as that uid, stop and kill the sandboxed program and share its per-uid
// quotas (round 11 attacker, issue 12). A uid inside any delegated range
// is never handed out.
func TestASandboxUIDIsNeverOneDelegatedToAUserAsSubordinate(t *testing.T) {
	needsRoot(t, "sandbox uids are only chosen for root's runs")
	useTempHostUIDRecord(t)
	key := StateName("com.acme.delegated", "/srv/delegated")
	want := stateUIDOf(key)
	dir := t.TempDir()
	subuid, subgid := filepath.Join(dir, "subuid"), filepath.Join(dir, "subgid")
	os.WriteFile(subuid, []byte("# a comment\nalice:100000:65536\nmallory:"+strconv.Itoa(want-10)+":20\n"), 0o644)
	os.WriteFile(subgid, []byte("bob:"+strconv.Itoa(want+11)+":1\n"), 0o644)
	old := subordinateFiles
	subordinateFiles = []string{subuid, subgid}
	t.Cleanup(func() { subordinateFiles = old })
	_, uid, err := ClaimStateFolder(t.TempDir(), key, "")
	if err != nil {
		t.Fatal(err)
	}
	if uid >= want-10 && uid < want+10 || uid == want+11 {
		t.Fatalf("got uid %d, inside a range /etc/subuid or /etc/subgid delegates (%d..%d, %d)", uid, want-10, want+9, want+11)
	}
}

// TestSubordinateRangesAreReadAsNewuidmapReadsThem: delegated parsed the
// ranges as decimal only, while newuidmap reads them with strtoul base 0;
// "a12u:0x7805af25:1" delegated a sandbox's uid that egressd did not see
// as delegated, and that user killed the sandbox (round 12 attacker).
func TestSubordinateRangesAreReadAsNewuidmapReadsThem(t *testing.T) {
	for in, want := range map[string]uint64{"2013638437": 2013638437, "0x7805af25": 0x7805af25, "0X10": 16, "017": 15, " 42": 42, "0": 0,
		"-18446744071704038382": 2005513234} { // strtoul's wrap of a negative (round 13 attacker)
		if got, ok := parseULong(in); !ok || got != want {
			t.Errorf("parseULong(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "0x", "12a", "1_000", "09", "--1"} {
		if _, ok := parseULong(bad); ok {
			t.Errorf("parseULong(%q) accepted", bad)
		}
	}
	dir := t.TempDir()
	sub := filepath.Join(dir, "subuid")
	os.WriteFile(sub, []byte("a12u:0x7805af25:1\na12v:2005513234:1:junk\n"), 0o644) // shadow ignores fields past the third
	old := subordinateFiles
	subordinateFiles = []string{sub}
	t.Cleanup(func() { subordinateFiles = old })
	ranges, err := subordinateRanges()
	if err != nil {
		t.Fatal(err)
	}
	if _, d := ranges.holding(0x7805af25); !d {
		t.Fatalf("0x7805af25 is not delegated with a hex delegation (%v)", ranges)
	}
	if _, d := ranges.holding(2005513234); !d {
		t.Fatalf("2005513234 is not delegated with a fourth field on its line (%v)", ranges)
	}
}

// TestASandboxUIDIsNeverAHostGroupsGID: the sandbox's gid is its uid, and
// only users were checked; a host group with that gid gave the program
// its files (a 0640 root:group file in a bound folder read from inside;
// round 12 attacker).
func TestASandboxUIDIsNeverAHostGroupsGID(t *testing.T) {
	needsRoot(t, "sandbox uids are only chosen for root's runs")
	groupadd, err := exec.LookPath("groupadd")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("groupadd is required in CI")
		}
		t.Skip("no groupadd")
	}
	useTempHostUIDRecord(t)
	key := StateName("com.acme.grouped", "/srv/grouped")
	gid := stateUIDOf(key)
	name := "egt" + strconv.Itoa(gid%100000)
	if out, err := exec.Command(groupadd, "-g", strconv.Itoa(gid), name).CombinedOutput(); err != nil {
		t.Skipf("groupadd: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("groupdel", name).Run() })
	_, uid, err := ClaimStateFolder(t.TempDir(), key, "")
	if err != nil {
		t.Fatal(err)
	}
	if uid == gid {
		t.Fatalf("got uid %d, the gid of host group %s", uid, name)
	}
}

// TestASandboxUIDIsNeverAnAccountOnlyNSSKnows: the release build has no
// cgo, so os/user reads /etc/passwd and /etc/group only; an account that
// LDAP, SSSD or systemd-homed serves through NSS was invisible, and a
// sandbox could run as its uid (round 13 residual). getent asks NSS; the
// uid it names (as a user or a group) is skipped, and a getent that fails
// otherwise fails the pick closed. Here getent is a script standing for
// an NSS source; the real one must know root.
func TestASandboxUIDIsNeverAnAccountOnlyNSSKnows(t *testing.T) {
	needsRoot(t, "sandbox uids are only chosen for root's runs")
	if _, err := os.Stat("/usr/bin/getent"); err == nil {
		if known, err := nssKnows(context.Background(), "passwd", 0); !known || err != nil {
			t.Fatalf("the system's getent does not know uid 0: %v, %v", known, err)
		}
	}
	useTempHostUIDRecord(t)
	key := StateName("com.acme.ldap", "/srv/ldap")
	want := stateUIDOf(key)
	dir := t.TempDir()
	getent := filepath.Join(dir, "getent")
	for db, script := range map[string]string{
		"passwd": "#!/bin/sh\n[ \"$1\" = passwd ] && [ \"$2\" = " + strconv.Itoa(want) + " ] && exit 0\nexit 2\n",
		"group":  "#!/bin/sh\n[ \"$1\" = group ] && [ \"$2\" = " + strconv.Itoa(want) + " ] && exit 0\nexit 2\n",
	} {
		os.WriteFile(getent, []byte(script), 0o755)
		old := getentPaths
		getentPaths = []string{getent}
		_, uid, err := ClaimStateFolder(t.TempDir(), key, "")
		getentPaths = old
		if err != nil || uid == want {
			t.Fatalf("%s: got uid %d, %v; %d is an account NSS knows", db, uid, err, want)
		}
		useTempHostUIDRecord(t)
	}
	os.WriteFile(getent, []byte("#!/bin/sh\nexit 1\n"), 0o755)
	old := getentPaths
	getentPaths = []string{getent}
	t.Cleanup(func() { getentPaths = old })
	if _, _, err := ClaimStateFolder(t.TempDir(), key, ""); err == nil {
		t.Fatal("a getent that failed did not fail the pick")
	}
}

// needRoot skips a test that only root's uid picks reach, and fails it in CI.
func needRoot(t *testing.T) {
	t.Helper()
	needsRoot(t, "sandbox uids are only chosen for root's runs")
}

// useNsswitch points the nsswitch.conf egressd reads at a file holding
// text (none when text is "").
func useNsswitch(t *testing.T, text string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nsswitch.conf")
	if text != "" {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := nsswitchPath
	nsswitchPath = path
	t.Cleanup(func() { nsswitchPath = old })
}

// TestASandboxUIDIsRefusedWhenNSSServesSubordinateIDs: with "subid: NAME"
// in nsswitch.conf, newuidmap (shadow 4.13+) asks libsubid_NAME.so (SSSD,
// FreeIPA) which ranges a user may map, and egressd, reading only
// /etc/subuid and /etc/subgid, handed out a uid that source delegated: its
// user mapped it and killed the sandbox (round 17 attacker). Such a
// source cannot be listed by uid, so the pick fails closed with one line
// naming the line and the way out; "subid: files", or no subid line,
// picks as before.
func TestASandboxUIDIsRefusedWhenNSSServesSubordinateIDs(t *testing.T) {
	needRoot(t)
	key := StateName("com.acme.nsssubid", "/srv/nsssubid")
	for _, conf := range []string{
		"passwd: files\nsubid: a12\n",
		"# comment\nSUBID:\tsss files\n",
		"subid: files_with_suffix\n",
	} {
		useTempHostUIDRecord(t)
		useNsswitch(t, conf)
		_, uid, err := ClaimStateFolder(t.TempDir(), key, "")
		if err == nil {
			t.Fatalf("nsswitch.conf %q: got uid %d; NSS serves subordinate ids egressd cannot list", conf, uid)
		}
		if msg := err.Error(); !strings.Contains(msg, nsswitchPath+":") || !strings.Contains(msg, "subid: files") || strings.Contains(msg, "\n") {
			t.Errorf("nsswitch.conf %q: error %q; want one line naming the file and line and the way out", conf, msg)
		}
	}
	for _, conf := range []string{"", "passwd: files\n", "subid: files\n", "subid:   files sss\n", "#subid: sss\n", "subid:\n"} {
		useTempHostUIDRecord(t)
		useNsswitch(t, conf)
		if _, uid, err := ClaimStateFolder(t.TempDir(), key, ""); err != nil || uid != stateUIDOf(key) {
			t.Errorf("nsswitch.conf %q: uid %d, %v; want %d (subordinate ids from files)", conf, uid, err, stateUIDOf(key))
		}
	}
}

// TestASubordinateLineEndingInANULDelegatesAsNewuidmapReadsIt: shadow
// reads each /etc/subuid line as a C string, up to its first NUL, so
// "a12bob:START:COUNT\0" (no newline) is a delegation to newuidmap; egressd
// failed to parse "COUNT\x00", ignored the line and gave a delegated uid
// to a sandbox, which a12bob then became and killed (round 17 attacker).
func TestASubordinateLineEndingInANULDelegatesAsNewuidmapReadsIt(t *testing.T) {
	needRoot(t)
	useTempHostUIDRecord(t)
	key := StateName("com.acme.nulsubid", "/srv/nulsubid")
	want := stateUIDOf(key)
	dir := t.TempDir()
	subuid, subgid := filepath.Join(dir, "subuid"), filepath.Join(dir, "subgid")
	os.WriteFile(subuid, []byte("alice:100000:65536\na12bob:"+strconv.Itoa(want-3)+":16\x00"), 0o644)
	os.WriteFile(subgid, []byte("a12eve:"+strconv.Itoa(want+13)+":4\x00junk after the NUL\n"), 0o644)
	old := subordinateFiles
	subordinateFiles = []string{subuid, subgid}
	t.Cleanup(func() { subordinateFiles = old })
	_, uid, err := ClaimStateFolder(t.TempDir(), key, "")
	if err != nil {
		t.Fatal(err)
	}
	if uid >= want-3 && uid < want+17 {
		t.Fatalf("got uid %d, inside a range a NUL-ended line delegates ([%d, %d))", uid, want-3, want+17)
	}
}

// startInUserNamespace starts sleep in a new user namespace whose uid and
// gid maps are maps (host ids), as a container runtime would, and stops
// it when the test ends.
func startInUserNamespace(t *testing.T, maps []syscall.SysProcIDMap) {
	t.Helper()
	cmd := exec.Command("sleep", "infinity")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: maps, GidMappings: maps}
	if err := cmd.Start(); err != nil { // returns after the maps are written and sleep is exec'd
		if os.Getenv("CI") == "true" {
			t.Fatalf("start a process in a user namespace: %v", err)
		}
		t.Skipf("cannot start a process in a user namespace: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
}

// TestASandboxUIDIsNeverOneAUserNamespaceMaps: a container (LXC, nspawn
// -U, kubelet) whose user namespace maps a host range runs as only one of
// its ids, yet its root, unprivileged on the host, can setresuid to any
// id of the range; egressd gave a sandbox a uid of such a range and the
// container's root killed it (round 17 attacker). Every range a process's
// uid_map or gid_map maps is taken; a one-id map counts like the id a
// process runs as, so an integration whose own sandbox runs keeps its uid.
func TestASandboxUIDIsNeverOneAUserNamespaceMaps(t *testing.T) {
	needRoot(t)
	useTempHostUIDRecord(t)
	key := StateName("com.acme.containered", "/srv/containered")
	want := stateUIDOf(key)
	startInUserNamespace(t, []syscall.SysProcIDMap{{ContainerID: 0, HostID: want - 5, Size: 20}})
	_, uid, err := ClaimStateFolder(t.TempDir(), key, "")
	if err != nil {
		t.Fatal(err)
	}
	if uid >= want-5 && uid < want+15 {
		t.Fatalf("got uid %d, inside [%d, %d) which a running user namespace maps", uid, want-5, want+15)
	}

	// A one-id map of a new key's uid, by a process running as another id.
	useTempHostUIDRecord(t)
	other := StateName("com.acme.onemapped", "/srv/onemapped")
	mapped := stateUIDOf(other)
	startInUserNamespace(t, []syscall.SysProcIDMap{{ContainerID: 0, HostID: mapped - 100, Size: 1}, {ContainerID: 1, HostID: mapped, Size: 1}})
	s := t.TempDir()
	if _, uid, err = ClaimStateFolder(s, other, ""); err != nil || uid == mapped {
		t.Fatalf("got uid %d, %v; a running user namespace maps %d", uid, err, mapped)
	}

	// The key's own sandbox maps its uid alone (as start_linux.go does): it keeps it.
	startInUserNamespace(t, []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}})
	if _, again, err := ClaimStateFolder(s, other, ""); err != nil || again != uid {
		t.Fatalf("with its own sandbox running, %s got uid %d, %v; want its recorded %d", other, again, err, uid)
	}
}

// TestADelegationOfEveryUIDFailsThePickAtOnce: ranges are skipped whole,
// so a delegation (or a user namespace's map) over all 2^24 sandbox uids
// ends the pick with one line at once instead of testing each uid.
func TestADelegationOfEveryUIDFailsThePickAtOnce(t *testing.T) {
	needRoot(t)
	useTempHostUIDRecord(t)
	sub := filepath.Join(t.TempDir(), "subuid")
	os.WriteFile(sub, []byte("everyone:0:4294967296\n"), 0o644)
	old := subordinateFiles
	subordinateFiles = []string{sub}
	t.Cleanup(func() { subordinateFiles = old })
	_, uid, err := ClaimStateFolder(t.TempDir(), StateName("com.acme.crowded", "/srv/crowded"), "")
	if err == nil || !strings.Contains(err.Error(), "no free sandbox uid") {
		t.Fatalf("got uid %d, %v; every sandbox uid is delegated", uid, err)
	}
}

// TestAProcessWhoseIDsCannotBeReadFailsThePickClosed: a /proc entry that
// is there but cannot be read (an LSM, a hidepid mount) hid the ids its
// process runs as or maps, and the pick went on as if it held none. Here
// a built /proc whose uid_map is a folder stands for it; a process that
// is gone (no entry) is skipped as before.
func TestAProcessWhoseIDsCannotBeReadFailsThePickClosed(t *testing.T) {
	needRoot(t)
	useTempHostUIDRecord(t)
	proc := t.TempDir()
	os.MkdirAll(filepath.Join(proc, "41"), 0o755) // gone: its files vanished
	os.MkdirAll(filepath.Join(proc, "42", "uid_map"), 0o755)
	os.WriteFile(filepath.Join(proc, "42", "status"), []byte("Uid:\t0\t0\t0\t0\n"), 0o444)
	old := procRoot
	procRoot = proc
	t.Cleanup(func() { procRoot = old })
	_, uid, err := ClaimStateFolder(t.TempDir(), StateName("com.acme.hidden", "/srv/hidden"), "")
	if err == nil || !strings.Contains(err.Error(), filepath.Join(proc, "42", "uid_map")) {
		t.Fatalf("got uid %d, %v; process 42's map could not be read", uid, err)
	}
	os.Remove(filepath.Join(proc, "42", "uid_map"))
	if _, _, err := ClaimStateFolder(t.TempDir(), StateName("com.acme.hidden", "/srv/hidden"), ""); err != nil {
		t.Fatalf("with every entry readable or gone: %v", err)
	}
}

// TestANamespaceMappingTheUIDAsOneOfSeveralOneIDLinesTakesItFromAKeyThatHasIt:
// a container whose map was written as one-id lines ("0 1007 1", "1 V 1")
// maps two ids, yet each line was read alone as a running uid, which a key
// that already holds V is not checked against: its next run kept V and the
// container's unprivileged root killed it (round 18 sandbox attacker).
// A map is judged whole: more than one id mapped, every id is taken.
func TestANamespaceMappingTheUIDAsOneOfSeveralOneIDLinesTakesItFromAKeyThatHasIt(t *testing.T) {
	needRoot(t)
	useTempHostUIDRecord(t)
	key := StateName("com.acme.split", "/srv/split")
	s := t.TempDir()
	_, v, err := ClaimStateFolder(s, key, "")
	if err != nil {
		t.Fatal(err)
	}
	startInUserNamespace(t, []syscall.SysProcIDMap{{ContainerID: 0, HostID: 65534, Size: 1}, {ContainerID: 1, HostID: v, Size: 1}})
	if _, again, err := ClaimStateFolder(s, key, ""); err != nil || again == v {
		t.Fatalf("got uid %d, %v; a running namespace maps %d beside another id", again, err, v)
	}
}

// TestASandboxGIDIsNeverAnAccountsPrimaryGroup: an /etc/passwd entry whose
// primary gid is V, with no group V, runs with gid V; the pick asked only
// for a user V and a group V, and a new key's sandbox shared the account's
// gid (round 18 sandbox attacker).
func TestASandboxGIDIsNeverAnAccountsPrimaryGroup(t *testing.T) {
	needRoot(t)
	useTempHostUIDRecord(t)
	key := StateName("com.acme.pgid", "/srv/pgid")
	want := stateUIDOf(key)
	usePasswd(t, "root:x:0:0:root:/root:/bin/sh\na12g:x:1999:"+strconv.Itoa(want)+"::/nonexistent:/usr/sbin/nologin\n")
	if _, uid, err := ClaimStateFolder(t.TempDir(), key, ""); err != nil || uid == want {
		t.Fatalf("got uid %d, %v; %d is an account's primary gid", uid, err, want)
	}
}

// TestAZeroPaddedPrimaryGIDIsReadAsANumber: "a12z:x:3999:02002567354:…"
// runs with gid 2002567354 (glibc reads the field as a number), but the
// check compared the text (round 19 sandbox attacker).
func TestAZeroPaddedPrimaryGIDIsReadAsANumber(t *testing.T) {
	needRoot(t)
	useTempHostUIDRecord(t)
	key := StateName("com.acme.padded", "/srv/padded")
	want := stateUIDOf(key)
	usePasswd(t, "a12z:x:3999:0"+strconv.Itoa(want)+"::/nonexistent:/usr/sbin/nologin\n")
	if _, uid, err := ClaimStateFolder(t.TempDir(), key, ""); err != nil || uid == want {
		t.Fatalf("got uid %d, %v; %d is an account's primary gid, written 0%d", uid, err, want, want)
	}
}

// TestAUIDOnlyOneThreadHoldsIsNotASandboxs: credentials are per thread;
// a server that switches ids on one thread with raw syscalls (Samba,
// nfs-ganesha) shows its leader's ids in /proc/PID/status only, and a new
// key was given the thread's uid, which then killed the sandbox (round 19
// sandbox attacker). Every thread's status is read.
func TestAUIDOnlyOneThreadHoldsIsNotASandboxs(t *testing.T) {
	needRoot(t)
	useTempHostUIDRecord(t)
	key := StateName("com.acme.threaded", "/srv/threaded")
	want := stateUIDOf(key)
	held, release := make(chan error), make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		_, _, errno := syscall.RawSyscall(syscall.SYS_SETRESUID, ^uintptr(0), uintptr(want), ^uintptr(0))
		if errno != 0 {
			held <- errno
			return
		}
		held <- nil
		<-release
		syscall.RawSyscall(syscall.SYS_SETRESUID, ^uintptr(0), 0, ^uintptr(0))
	}()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	defer close(release)
	if _, uid, err := ClaimStateFolder(t.TempDir(), key, ""); err != nil || uid == want {
		t.Fatalf("got uid %d, %v; a thread of this process runs as %d", uid, err, want)
	}
}

// usePasswd points the account list the pick reads at a file holding text.
func usePasswd(t *testing.T, text string) {
	t.Helper()
	passwd := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(passwd, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	old := passwdFile
	passwdFile = passwd
	t.Cleanup(func() { passwdFile = old })
}
