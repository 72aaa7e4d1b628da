package selftest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

func procProbes() []probe {
	return []probe{
		{"proc-other-fd", LayerPID, probeProcFD},
		{"proc-other-cwd-root", LayerPID, func(context.Context, *Config) (string, string) { return procOpen("cwd", "root") }},
		{"proc-other-environ", LayerPID, func(context.Context, *Config) (string, string) { return procOpen("environ") }},
		{"proc-other-mem", LayerPID, func(context.Context, *Config) (string, string) { return procOpen("mem") }},
		{"cgroup-host-paths", LayerCgroupNS, probeCgroupPaths},
		{"inherited-descriptor", LayerFD, probeInherited},
	}
}

// probeCgroupPaths reads /proc/self/cgroup: in the sandbox's own cgroup
// namespace every path is "/"; any other is the host's (the launcher's
// group, egressd's host pid in the sandbox group's name).
func probeCgroupPaths(context.Context, *Config) (string, string) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return skipped("/proc/self/cgroup: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && parts[2] != "/" {
			return opened("/proc/self/cgroup shows the host path %q", line)
		}
	}
	return closed("/proc/self/cgroup shows only \"/\"")
}

// maxProcs bounds the walk: outside a sandbox /proc holds the whole host.
const maxProcs = 400

// otherProcs lists /proc/PID and /proc/PID/task/TID for every process but
// this one and its own children (probes start some).
func otherProcs() []string {
	self := os.Getpid()
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || parentOf(pid) == self {
			continue
		}
		dir := "/proc/" + e.Name()
		out = append(out, dir)
		tasks, _ := os.ReadDir(dir + "/task")
		for _, t := range tasks {
			out = append(out, dir+"/task/"+t.Name())
		}
		if len(out) > maxProcs {
			break
		}
	}
	return out
}

func parentOf(pid int) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+4 < len(s) {
		f := strings.Fields(s[i+2:])
		if len(f) > 1 {
			ppid, _ := strconv.Atoi(f[1])
			return ppid
		}
	}
	return 0
}

// procOpen opens each named entry of every other process. Opening one is
// OPEN: it is that process's folder, variables or memory.
func procOpen(names ...string) (string, string) {
	procs := otherProcs()
	if len(procs) == 0 {
		return closed("no other process is visible")
	}
	var last error
	for _, p := range procs {
		for _, n := range names {
			path := filepath.Join(p, n)
			fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
				return opened("opened %s", path)
			}
			last = err
		}
	}
	return closed("%d other processes and threads visible; every open refused (last: %s)", len(procs), short(last))
}

// probeProcFD walks every other process's descriptors, climbing ".." from
// each, looking for the host marker the outer planted beside the
// integration folder. Any descriptor that opens is OPEN; reaching the
// marker says the host's tree is behind it.
func probeProcFD(_ context.Context, c *Config) (string, string) {
	procs := otherProcs()
	var found []string
	for _, p := range procs {
		ents, err := os.ReadDir(p + "/fd")
		if err != nil {
			continue
		}
		for _, e := range ents {
			link := p + "/fd/" + e.Name()
			var st unix.Stat_t
			if unix.Stat(link, &st) != nil {
				continue
			}
			note := link
			if c.HostMarker != "" && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				climb := link
				for range 5 {
					// No filepath.Join: it would clean the ".." away. The
					// marker is tried beside each folder climbed to and
					// at its full host path, in case the climb reached /.
					for _, try := range []string{climb + "/" + filepath.Base(c.HostMarker), climb + c.HostMarker} {
						if _, err := os.Stat(try); err == nil {
							return opened("%s: climbed into the host's filesystem (%s)", climb, c.HostMarker)
						}
					}
					climb += "/.."
				}
			}
			found = append(found, note)
		}
	}
	if len(found) > 0 {
		return opened("another process's descriptors open: %s", strings.Join(limit(found, 4), ", "))
	}
	return closed("%d other processes and threads visible; no descriptor of theirs opens", len(procs))
}

// inheritedAtStart is what the leaked descriptors held when the inner half
// started, before the Go runtime or any probe opened descriptors of its own.
var inheritedAtStart = map[int]string{}

// noteInherited records the content behind each leaked descriptor number.
func noteInherited(fds []int) {
	for _, fd := range fds {
		buf := make([]byte, 128)
		n, err := unix.Pread(fd, buf, 0)
		if err == nil {
			inheritedAtStart[fd] = string(buf[:n])
		}
	}
}

func probeInherited(_ context.Context, c *Config) (string, string) {
	if len(c.LeakedFDs) == 0 {
		return skipped("no descriptor was leaked")
	}
	for _, fd := range c.LeakedFDs {
		if strings.Contains(inheritedAtStart[fd], c.Nonce) {
			return opened("descriptor %d, leaked by egressd's launcher, reads the host's file", fd)
		}
	}
	return closed("descriptors %v did not reach the program", c.LeakedFDs)
}
