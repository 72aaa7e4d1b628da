//go:build !egressd_test_nolandlock

package sandbox

const landlockOff = false
