//go:build egressd_test_nolandlock

package sandbox

// landlockOff is set only in binaries built with the
// egressd_test_nolandlock tag: the tests' stand-in for a kernel without
// Landlock, to prove the namespaces hold on their own. No release build,
// flag or variable can turn Landlock off.
const landlockOff = true
