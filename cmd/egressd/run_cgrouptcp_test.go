package main

import (
	"strconv"
	"strings"
	"testing"
)

// TestRunSocketBuffersAndMemoryCannotEachTakeTheWholeBound: cgroup v1
// charges TCP buffers to memory.kmem.tcp, a counter beside the group's
// memory.limit_in_bytes; with each set to total_memory_mb one sandbox held
// 918 MB of memory and 1,133 MB of TCP buffers under a 1024 MB bound. The
// two limits the host reads while the sandbox runs now add up to the bound,
// and the audit log says how it is split.
func TestRunSocketBuffersAndMemoryCannotEachTakeTheWholeBound(t *testing.T) {
	requireCgroup(t)
	e := newSandboxEnv(t)
	cmd := e.configured("sandbox_limits:\n  total_memory_mb: 256\n", `echo ready; read x`)
	_, proceed := e.pausedRun(cmd)
	mem := sandboxGroups(t, cmd.Process.Pid)["memory"]
	sum := int64(0)
	for _, file := range []string{"memory.limit_in_bytes", "memory.kmem.tcp.limit_in_bytes"} {
		n, err := strconv.ParseInt(readCgroupFile(t, mem, file), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		sum += n
	}
	if sum > 256<<20 {
		t.Errorf("memory.limit_in_bytes + memory.kmem.tcp.limit_in_bytes = %d MB, past the sandbox's bound of 256 MB", sum>>20)
	}
	if out, code := proceed(); code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if want := "memory 256 MB for the whole sandbox: 192 MB for its processes and kernel memory, 64 MB for socket buffers"; !strings.Contains(e.auditLog(), want) {
		t.Fatalf("want %q in the audit log:\n%s", want, e.auditLog())
	}
}
