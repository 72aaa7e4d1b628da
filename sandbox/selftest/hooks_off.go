//go:build !egressd_testhooks

package selftest

// TestTargets is the test-only override of the targets; the shipped binary
// has none.
func TestTargets() (Targets, []string, bool, bool) { return Targets{}, nil, false, false }
