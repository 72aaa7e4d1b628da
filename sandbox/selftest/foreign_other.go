//go:build !linux || !amd64

package selftest

import "context"

func foreignABIChild() int { return 0 }

func probeForeignABI(context.Context, *Config) (string, string) {
	return skipped("a foreign ABI probe exists for amd64 only")
}
