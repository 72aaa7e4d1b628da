//go:build linux && egressd_testhooks

package sandbox

import (
	"os"
	"strings"
	"time"
)

// testHookEnv names the layers a test switches off, comma-separated:
// seccomp, caps, landlock, fd, userns-limit, cgroupns; and "setup", which makes the
// init stall before it reports, as a starved kernel quota made it. Only binaries built with the
// egressd_testhooks tag read it; the selftest tests build one to prove each
// probe reports OPEN when the layer that stops it is missing.
const testHookEnv = "EGRESSD_TESTHOOK_LAYERS_OFF"

func layerOff(name string) bool {
	for _, l := range strings.Split(os.Getenv(testHookEnv), ",") {
		if l == name {
			return true
		}
	}
	return false
}

// initEnv carries the switch to the init, beside its base environment.
func initEnv() []string {
	env := append([]string{}, initBaseEnv...)
	if v := os.Getenv(testHookEnv); v != "" {
		env = append(env, testHookEnv+"="+v)
	}
	return env
}

// setupTimeoutEnv shortens SetupTimeout in the supervisor, so a test of the
// stall need not wait a minute.
const setupTimeoutEnv = "EGRESSD_TESTHOOK_SETUP_TIMEOUT"

func init() {
	if d, err := time.ParseDuration(os.Getenv(setupTimeoutEnv)); err == nil {
		SetupTimeout = d
	}
}

// swapLinkEnv, LINK=TARGET, makes Start point the symlink LINK at TARGET
// before it builds anything: an author racing the deploy link, made
// deterministic, to prove the folder bound is the one egressd checked.
const swapLinkEnv = "EGRESSD_TESTHOOK_SWAP_LINK"

func testSwapLink() error {
	link, target, ok := strings.Cut(os.Getenv(swapLinkEnv), "=")
	if !ok {
		return nil
	}
	tmp := link + ".swap"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, link)
}
