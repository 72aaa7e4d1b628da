package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A sandbox's own control group bounds what rlimits cannot: the tasks of
// the whole sandbox (pids), its memory with the kernel memory it makes the
// kernel allocate (a struct file kept alive by a mapping after its
// descriptor is closed escapes RLIMIT_NOFILE, not the memory controller),
// and its CPU time (a CFS quota: processes that each call setsid() get an
// autogroup each and would otherwise outweigh the host).
//
// Only root can make one. Under cgroup v2 the group is made where the
// controllers are already delegated (egressd's own group lists them in
// cgroup.subtree_control); otherwise one group per v1 hierarchy (pids,
// memory, cpu). If a group can be had but a bound cannot be set, the run
// does not start.

// cgroupPrefix begins the name of every group egressd makes.
const cgroupPrefix = "egressd-"

// cgroupControllers are the controllers a sandbox's group needs.
var cgroupControllers = []string{"pids", "memory", "cpu"}

// cgroup is a sandbox's group: one directory in v2, or one per v1
// hierarchy. Bounds says what holds, for the audit log.
type cgroup struct {
	dirs   []string
	Bounds string
}

// cgroupPlace is where egressd's own group of one hierarchy is on the host.
type cgroupPlace struct {
	controllers []string // those this hierarchy carries
	dir         string   // egressd's own group, under the mount point
}

// openCgroup makes the sandbox's group, named after key and this process,
// with every bound of l set, before the init is started. With no group to
// be had it returns a cgroup whose Bounds says why, and no error.
func openCgroup(key string, l Limits) (*cgroup, error) {
	if os.Geteuid() != 0 {
		return &cgroup{Bounds: "cgroup bounds absent (egressd is not root): only the rlimits hold"}, nil
	}
	places, err := cgroupPlaces()
	if err != nil {
		return nil, fmt.Errorf("sandbox: cgroup: %w", err)
	}
	name := cgroupName(key, os.Getpid())
	if dir, ok := delegatedV2(places); ok {
		return makeCgroup(l, []string{filepath.Join(dir, name)}, "v2", v2Bounds)
	}
	var dirs []string
	for _, c := range cgroupControllers {
		if p, ok := findV1(places, c); ok {
			dirs = append(dirs, filepath.Join(p.dir, name))
		}
	}
	if len(dirs) == 0 {
		return &cgroup{Bounds: "cgroup bounds absent (no v1 pids, memory or cpu hierarchy, and no v2 controllers delegated): only the rlimits hold"}, nil
	}
	if len(dirs) != len(cgroupControllers) {
		return nil, fmt.Errorf("sandbox: cgroup v1 has only %d of the pids, memory and cpu hierarchies: the sandbox's bounds cannot all be set", len(dirs))
	}
	return makeCgroup(l, dirs, "v1", v1Bounds)
}

// makeCgroup removes stale groups beside each dir, makes each dir and sets
// the bounds; on failure it removes what it made.
func makeCgroup(l Limits, dirs []string, version string, bounds func(Limits) []cgroupFile) (*cgroup, error) {
	cg := &cgroup{}
	for _, dir := range dirs {
		removeStaleCgroups(filepath.Dir(dir))
		err := os.Mkdir(dir, 0o700)
		if errors.Is(err, fs.ErrExist) {
			// This process numbers its groups, so one of its name is not
			// its own: a killed supervisor's that had this pid (pids wrap,
			// round 53), which the sweep took for this live process's.
			// rmdir takes it only if it is empty.
			unix.Rmdir(dir)
			err = os.Mkdir(dir, 0o700)
		}
		if err != nil {
			cg.remove()
			return nil, fmt.Errorf("sandbox: cgroup %s: %w", version, err)
		}
		cg.dirs = append(cg.dirs, dir)
	}
	var lacks []string
	for _, f := range bounds(l) {
		path, err := cg.file(f.name)
		if err == nil {
			err = writeFile(path, f.value)
		}
		if errors.Is(err, os.ErrNotExist) && f.optional {
			lacks = append(lacks, f.name)
			continue
		}
		if err != nil {
			cg.remove()
			return nil, fmt.Errorf("sandbox: cgroup %s: cannot set %s=%s: %w", version, f.name, f.value, err)
		}
	}
	cg.Bounds = fmt.Sprintf("cgroup %s: tasks %d, %s, CPU %.2f (quota %dus per %dus)",
		version, l.Processes, memoryBound(version, l), l.CPUs, l.cpuQuotaUS(), cpuPeriodUS)
	if len(lacks) > 0 { // the claims above that these back do not hold
		cg.Bounds += "; this kernel lacks " + strings.Join(lacks, ", ")
	}
	return cg, nil
}

// cgroupFile is one bound: a control file and its value. An optional file
// the kernel lacks (swap accounting off) bounds nothing to be set.
type cgroupFile struct {
	name, value string
	optional    bool
}

// v1TCPBytes is the part of the sandbox's memory bound that cgroup v1
// gives its socket buffers: v1 charges them to memory.kmem.tcp, a counter
// beside memory.limit_in_bytes, not inside it, so the two limits must add
// up to the bound (with each at the bound, one sandbox held 918 MB of
// memory and 1,133 MB of TCP buffers under 1024 MB). A quarter holds the
// 256 KiB each way of a few hundred busy connections.
func (l Limits) v1TCPBytes() int64 { return int64(l.TotalMemoryMB) << 20 / 4 }

// memoryBound says how the memory bound is set: v2 charges everything to
// memory.max; v1 splits it (v1TCPBytes).
func memoryBound(version string, l Limits) string {
	if version != "v1" {
		return fmt.Sprintf("memory %d MB for the whole sandbox (kernel memory and socket buffers included, no swap)", l.TotalMemoryMB)
	}
	total, tcp := int64(l.TotalMemoryMB)<<20, l.v1TCPBytes()
	return fmt.Sprintf("memory %d MB for the whole sandbox: %d MB for its processes and kernel memory, %d MB for socket buffers (no swap)",
		l.TotalMemoryMB, (total-tcp)>>20, tcp>>20)
}

func v1Bounds(l Limits) []cgroupFile {
	tcp := l.v1TCPBytes()
	mem := strconv.FormatInt(int64(l.TotalMemoryMB)<<20-tcp, 10)
	return []cgroupFile{
		{name: "pids.max", value: strconv.Itoa(l.Processes)},
		{name: "memory.limit_in_bytes", value: mem},
		{name: "memory.memsw.limit_in_bytes", value: mem, optional: true}, // after the limit: it must not be lower
		// v1 charges socket buffers only once this is set, and apart from
		// the rest (v2 charges them to memory.max).
		{name: "memory.kmem.tcp.limit_in_bytes", value: strconv.FormatInt(tcp, 10), optional: true},
		{name: "cpu.cfs_period_us", value: strconv.Itoa(cpuPeriodUS)},
		{name: "cpu.cfs_quota_us", value: strconv.Itoa(l.cpuQuotaUS())},
	}
}

func v2Bounds(l Limits) []cgroupFile {
	return []cgroupFile{
		{name: "pids.max", value: strconv.Itoa(l.Processes)},
		{name: "memory.max", value: strconv.FormatInt(int64(l.TotalMemoryMB)<<20, 10)},
		{name: "memory.swap.max", value: "0", optional: true},
		{name: "cpu.max", value: fmt.Sprintf("%d %d", l.cpuQuotaUS(), cpuPeriodUS)},
	}
}

// file finds the group directory that holds a control file.
func (cg *cgroup) file(name string) (string, error) {
	for _, dir := range cg.dirs {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, os.ErrNotExist)
}

// enter moves the init (every thread of it) into the group, before the
// target exists: everything the target starts is born inside.
func (cg *cgroup) enter(pid int) error {
	for _, dir := range cg.dirs {
		if err := writeFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("sandbox: cgroup: move the init into %s: %w", dir, err)
		}
	}
	return nil
}

// The OOM killer's choice. At the sandbox's memory bound the largest task
// is often the init (the egressd binary's pages), and one hungry process
// would end the whole sandbox. Lowering the init's score takes
// CAP_SYS_RESOURCE, which a container's root may lack; raising is free. So
// the init's score is raised to the most before the target is forked, which
// inherits it, and set back after: every task of the program is picked
// before the init, and before the host's own processes when the whole host
// runs short.

// oomScorePath is the init's oom_score_adj.
func oomScorePath(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/oom_score_adj" }

// markTargetFirst raises the init's score, before the target is forked, and
// returns the score to set back once it is. Without a group (a normal
// user) there is no memory bound of the sandbox's own, and nothing is done.
func (cg *cgroup) markTargetFirst(pid int) (string, error) {
	if len(cg.dirs) == 0 {
		return "", nil
	}
	old, err := os.ReadFile(oomScorePath(pid))
	if err == nil {
		err = writeFile(oomScorePath(pid), "1000")
	}
	if err != nil {
		return "", fmt.Errorf("sandbox: the target's OOM score: %w", err)
	}
	return strings.TrimSpace(string(old)), nil
}

// spareInit sets the init's score back once the target runs. An init
// that has already exited (a program that ran and ended at once) needs
// nothing spared.
func (cg *cgroup) spareInit(pid int, score string) error {
	if score == "" {
		return nil
	}
	err := writeFile(oomScorePath(pid), score)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sandbox: spare the init from the OOM killer: %w", err)
	}
	return nil
}

// remove removes the group once every task in it has exited.
func (cg *cgroup) remove() {
	if cg == nil {
		return
	}
	for i := len(cg.dirs) - 1; i >= 0; i-- {
		unix.Rmdir(cg.dirs[i])
	}
	cg.dirs = nil
}

// CgroupDirs are the sandbox's group directories on the host (none when
// no group could be had).
func (sb *Sandbox) CgroupDirs() []string { return append([]string{}, sb.cgroup.dirs...) }

// CgroupBounds says which cgroup bounds hold, or why there are none.
func (sb *Sandbox) CgroupBounds() string { return sb.cgroup.Bounds }

var unsafeInName = regexp.MustCompile(`[^A-Za-z0-9._@-]`)

// sandboxesStarted numbers the sandboxes of this process, so two of one
// key never share a group.
var sandboxesStarted atomic.Uint64

// cgroupName is the group's name: egressd's prefix, the sandbox key, the
// sandbox's number in this process, and the supervisor's PID namespace and
// pid, which say when a group left behind is stale (staleGroup).
func cgroupName(key string, pid int) string {
	key = unsafeInName.ReplaceAllString(key, "_")
	if len(key) > 96 {
		key = key[:96]
	}
	return fmt.Sprintf("%s%s-%d-%s-%d", cgroupPrefix, key, sandboxesStarted.Add(1), ownPIDNamespace(), pid)
}

// ownPIDNamespace names this process's PID namespace ("ns" and its inode),
// or "" if it cannot be read.
var ownPIDNamespace = sync.OnceValue(func() string {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return ""
	}
	return "ns" + strconv.FormatUint(st.Ino, 10)
})

// staleGroup reports whether name is the group of a supervisor that is no
// longer running: one of this PID namespace whose pid is gone. A pid says
// nothing across PID namespaces (an egressd run as PID 1 of its own took
// every other supervisor's groups for stale, and removed one between its
// mkdir and the init's move into it), and a name not in egressd's form
// (a folder someone else made with egressd's prefix) is never egressd's
// to remove.
func staleGroup(name string) bool {
	rest, pidText, ok := cutLast(name, '-')
	if !ok || !strings.HasPrefix(name, cgroupPrefix) {
		return false
	}
	_, ns, ok := cutLast(rest, '-')
	if !ok || ns == "" || ns != ownPIDNamespace() {
		return false
	}
	pid, err := strconv.Atoi(pidText)
	return err == nil && pid > 0 && unix.Kill(pid, 0) == unix.ESRCH
}

// cutLast is strings.Cut at the last sep.
func cutLast(s string, sep byte) (before, after string, found bool) {
	if i := strings.LastIndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// removeStaleCgroups removes the groups in parent that an egressd which is
// no longer running left behind (killed before it could remove them). A
// group that still holds a task is not empty, and rmdir refuses it.
func removeStaleCgroups(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && staleGroup(e.Name()) {
			unix.Rmdir(filepath.Join(parent, e.Name()))
		}
	}
}

// delegatedV2 finds egressd's v2 group if it delegates every controller
// the sandbox needs to its children.
func delegatedV2(places []cgroupPlace) (string, bool) {
	for _, p := range places {
		if p.controllers != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(p.dir, "cgroup.subtree_control"))
		if err != nil {
			return "", false
		}
		have := strings.Fields(string(data))
		for _, c := range cgroupControllers {
			if !slices.Contains(have, c) {
				return "", false
			}
		}
		return p.dir, true
	}
	return "", false
}

func findV1(places []cgroupPlace, controller string) (cgroupPlace, bool) {
	for _, p := range places {
		if slices.Contains(p.controllers, controller) {
			return p, true
		}
	}
	return cgroupPlace{}, false
}

// cgroupPlaces reads where egressd's own groups are: each cgroup mount in
// /proc/self/mountinfo, joined with this process's path in that hierarchy
// from /proc/self/cgroup. A v2 place has nil controllers.
func cgroupPlaces() ([]cgroupPlace, error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseCgroupPlaces(f, string(self))
}

// parseCgroupPlaces is cgroupPlaces from the text of mountinfo and of
// /proc/self/cgroup.
func parseCgroupPlaces(mountinfo io.Reader, self string) ([]cgroupPlace, error) {
	own := ownCgroupPaths(self)
	var places []cgroupPlace
	s := bufio.NewScanner(mountinfo)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		pre, post, ok := strings.Cut(s.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 3 {
			continue
		}
		root, mountPoint := unescapeMount(fields[3]), unescapeMount(fields[4])
		var controllers []string
		key := ""
		switch tail[0] {
		case "cgroup2":
		case "cgroup":
			for _, o := range strings.Split(tail[2], ",") {
				if slices.Contains(cgroupControllers, o) || o == "cpuacct" {
					controllers = append(controllers, o)
				}
			}
			if len(controllers) == 0 {
				continue
			}
			key = "v1"
		default:
			continue
		}
		path, ok := own[":"]
		if key == "v1" {
			path, ok = ownV1Path(own, controllers)
		}
		if !ok || !(root == "/" || path == root || strings.HasPrefix(path, root+"/")) {
			continue // egressd's group is not under this mount's root
		}
		rel := strings.TrimPrefix(path, root)
		places = append(places, cgroupPlace{controllers: controllers, dir: filepath.Join(mountPoint, rel)})
	}
	return places, s.Err()
}

// ownCgroupPaths reads /proc/self/cgroup: "v1:CONTROLLERS" or ":" (v2) to
// the path.
func ownCgroupPaths(self string) map[string]string {
	own := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(self), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			own[":"] = parts[2]
		} else {
			own["v1:"+parts[1]] = parts[2]
		}
	}
	return own
}

// ownV1Path finds the path of the hierarchy that carries controllers.
func ownV1Path(own map[string]string, controllers []string) (string, bool) {
	for k, path := range own {
		list, ok := strings.CutPrefix(k, "v1:")
		if ok && slices.Contains(strings.Split(list, ","), controllers[0]) {
			return path, true
		}
	}
	return "", false
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
