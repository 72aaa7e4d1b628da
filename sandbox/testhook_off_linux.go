//go:build linux && !egressd_testhooks

package sandbox

// layerOff is the test-only switch that turns one layer off to prove a
// selftest probe can fail. Release builds have no such switch: every
// layer is always on.
func layerOff(string) bool { return false }

// initEnv is the init's environment.
func initEnv() []string { return initBaseEnv }

// testSwapLink is the test-only deploy-link swap; release builds have none.
func testSwapLink() error { return nil }
