//go:build !linux || !amd64

package selftest

func foreignABI() (string, string) {
	return skipped("a foreign ABI probe exists for amd64 only")
}
