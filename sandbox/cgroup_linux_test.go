package sandbox

import (
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestCgroupPlacesJoinMountRootAndOwnPath: a hierarchy mounted at a group
// (a container's view: root /process_api/X) holds egressd's group at the
// mount point plus what is left of its path; a mount whose root is not
// above egressd's group, or a hierarchy egressd has no line for, is no
// place; cpu,cpuacct is found for cpu.
func TestCgroupPlacesJoinMountRootAndOwnPath(t *testing.T) {
	mountinfo := `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 /process_api /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 /elsewhere /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
41 31 0:38 / /sys/fs/cgroup/unified\040dir rw,relatime - cgroup2 cgroup2 rw
`
	self := "8:pids:/process_api/x\n4:memory:/process_api/x\n2:cpu,cpuacct:/\n0::/a b\n"
	places, err := parseCgroupPlaces(strings.NewReader(mountinfo), self)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range places {
		got[strings.Join(p.controllers, ",")] = p.dir
	}
	want := map[string]string{
		"cpu,cpuacct": "/sys/fs/cgroup/cpu,cpuacct",
		"memory":      "/sys/fs/cgroup/memory/x",
		"":            "/sys/fs/cgroup/unified dir/a b",
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%q: got %q, want %q", k, got[k], v)
		}
	}
	if p, ok := findV1(places, "cpu"); !ok || p.dir != "/sys/fs/cgroup/cpu,cpuacct" {
		t.Errorf("cpu: %v %v", p, ok)
	}
	if _, ok := findV1(places, "pids"); ok {
		t.Error("pids mounted at a root that is not above egressd's group was taken")
	}
}

// TestCgroupNameHoldsNoPathAndEndsInThePid: a key with a slash or a
// newline cannot name a group elsewhere, and the pid the stale-group sweep
// reads is the last dash-separated field.
func TestCgroupNameHoldsNoPathAndEndsInThePid(t *testing.T) {
	got := cgroupName("../../evil\nid@0123", 42)
	if !strings.HasPrefix(got, "egressd-.._.._evil_id@0123-") || !strings.HasSuffix(got, "-42") || got == cgroupName("../../evil\nid@0123", 42) {
		t.Fatalf("got %q", got)
	}
	// A name is at most 255 bytes (NAME_MAX): the key is cut to 96.
	if long := cgroupName(strings.Repeat("a", 500), 7); len(long) > 160 || !strings.HasSuffix(long, "-7") {
		t.Fatalf("got %q", long)
	}
}

// TestLimitsRefuseCPUsThatAreNoBound: zero, NaN or absurd CPUs never reach
// cpu.cfs_quota_us (0 there would be refused, -1 unlimited).
func TestLimitsRefuseCPUsThatAreNoBound(t *testing.T) {
	for _, cpus := range []float64{0, -1, 0.001, 1e9, math.NaN()} {
		l := DefaultLimits
		l.CPUs = cpus
		if l.check() == nil {
			t.Errorf("cpus %v accepted", cpus)
		}
	}
	l := DefaultLimits
	l.CPUs = 0.5
	if err := l.check(); err != nil || l.cpuQuotaUS() != 50000 {
		t.Fatalf("0.5 CPUs: %v, quota %d", err, l.cpuQuotaUS())
	}
}

// TestOnlyAGroupOfThisPIDNamespacesGoneSupervisorIsStale: an egressd run
// as PID 1 of its own PID namespace saw every other supervisor's pid as
// gone and removed their groups (one between its mkdir and the init's
// move into it: "cgroup.procs: no such file or directory"), and any
// egressd removed a test's own folder named egressd-test-parent-NNN.
func TestOnlyAGroupOfThisPIDNamespacesGoneSupervisorIsStale(t *testing.T) {
	gone := 1 << 30 // above pid_max: no such process
	for name, want := range map[string]bool{
		cgroupName("com.x@abc", gone):                                       true,
		cgroupName("com.x@abc", os.Getpid()):                                false,
		"egressd-com.x@abc-1-ns1-" + strconv.Itoa(gone):                     false, // another PID namespace
		"egressd-com.x@abc-1-" + strconv.Itoa(gone):                         false, // no namespace: not egressd's form
		"egressd-test-parent-404018959":                                     false,
		"other-com.x@abc-1-" + ownPIDNamespace() + "-" + strconv.Itoa(gone): false,
	} {
		if got := staleGroup(name); got != want {
			t.Errorf("staleGroup(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestAGroupLeftUnderThisProcesssNameIsTakenOver is round 53's f3: a
// supervisor killed before it removed its group left it empty; a later
// supervisor of the same integration that was given the same pid (pids
// wrap) made exactly that name, its sweep judged the group live (the pid
// was its own), and mkdir failed: the run refused to start. A group of
// this process's name is never this process's own: it is taken over.
func TestAGroupLeftUnderThisProcesssNameIsTakenOver(t *testing.T) {
	needsRoot(t, "only root's sandboxes have groups")
	cg, err := openCgroup("com.test.pidreuse", DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if len(cg.dirs) == 0 {
		t.Skip(cg.Bounds) // no group to be had on this host
	}
	left := cg.dirs
	cg.remove()
	for _, dir := range left {
		if err := os.Mkdir(dir, 0o700); err != nil { // what the killed one left
			t.Fatal(err)
		}
	}
	sandboxesStarted.Add(^uint64(0)) // the same number again, as a new process with this pid
	again, err := openCgroup("com.test.pidreuse", DefaultLimits)
	if err != nil {
		for _, dir := range left {
			os.Remove(dir)
		}
		t.Fatalf("a group left under this name stops the run: %v", err)
	}
	if !slices.Equal(again.dirs, left) {
		t.Errorf("groups %v, want %v", again.dirs, left)
	}
	again.remove()
}
