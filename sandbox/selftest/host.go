package selftest

import (
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Host is what decides what "egressd run" can enforce on this machine.
type Host struct {
	Kernel      string `json:"kernel"`
	Arch        string `json:"arch"`
	LandlockABI int    `json:"landlock_abi"` // 0: no Landlock
	UserNS      string `json:"userns"`       // how this user may create user namespaces
	Root        bool   `json:"root"`
	Mode        string `json:"mode"` // "sandbox" or "insecure-env-only"
}

// ReadHost describes this host, from the outer half.
func ReadHost() Host {
	var u unix.Utsname
	unix.Uname(&u)
	h := Host{Kernel: unix.ByteSliceToString(u.Release[:]), Arch: runtime.GOARCH, Root: os.Geteuid() == 0}
	h.LandlockABI = landlockABI()
	h.UserNS = "max_user_namespaces=" + sysctl("user/max_user_namespaces")
	if v := sysctl("kernel/unprivileged_userns_clone"); v != "" {
		h.UserNS += " unprivileged_userns_clone=" + v
	}
	if v := sysctl("kernel/apparmor_restrict_unprivileged_userns"); v != "" {
		h.UserNS += " apparmor_restrict_unprivileged_userns=" + v
	}
	return h
}

func sysctl(name string) string {
	data, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}
