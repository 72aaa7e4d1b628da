//go:build !linux

package bounded

func shieldThread() (restore func()) { return func() {} }
