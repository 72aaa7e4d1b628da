package sandbox

import (
	"os"
	"testing"
)

// needsRoot skips t when not run as root, and fails it under CI=true,
// where a skip would read as a pass: why says what root is needed for.
func needsRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("needs root: " + why)
	}
	t.Skip("needs root: " + why)
}
