package policy

import (
	"fmt"

	"github.com/egressd/egressd/sandbox"
)

// BytesPerPinnedFile is what one struct file that a mapping keeps alive
// after its descriptor is closed charges to a sandbox's memory bound
// (measured on Linux 6.18, cgroup v1: 60,000 of them charged 30.7 MB).
// RLIMIT_NOFILE does not count them; only the memory bound does.
const BytesPerPinnedFile = 512

// SandboxMemoryWarning says when the sandbox's memory bound lets one
// sandbox pin more struct files than the host's fs.file-max, fileMax: it
// could then make every unprivileged process on the host fail with ENFILE.
// "" when it fits, or when fileMax is unknown (0).
func SandboxMemoryWarning(l sandbox.Limits, fileMax int64) string {
	files := int64(l.TotalMemoryMB) << 20 / BytesPerPinnedFile
	if fileMax <= 0 || files < fileMax {
		return ""
	}
	return fmt.Sprintf("sandbox_limits.total_memory_mb %d lets one sandbox keep about %d files open through mappings (%d bytes each), "+
		"not under this host's fs.file-max %d: every other process could get ENFILE; lower it to under %d",
		l.TotalMemoryMB, files, BytesPerPinnedFile, fileMax, fileMax*BytesPerPinnedFile>>20)
}
