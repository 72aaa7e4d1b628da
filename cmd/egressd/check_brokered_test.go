package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigRefusesMoreBrokeredConnectionsThanTunnels: a brokered
// connection is a tunnel too, so a brokered cap above max_tunnels (or
// below 1) could never be what the operator meant; check --config says so
// in one "path: message" line and fails.
func TestCheckConfigRefusesMoreBrokeredConnectionsThanTunnels(t *testing.T) {
	cases := map[string]string{
		"limits:\n  max_tunnels: 16\n  max_brokered_connections: 64\n": "limits.max_brokered_connections: must be at most limits.max_tunnels, 16 (64)",
		"limits:\n  max_brokered_connections: -1\n":                    "limits.max_brokered_connections: must be at least 1 (-1)",
	}
	for yaml, want := range cases {
		cfg := filepath.Join(t.TempDir(), "egressd.yaml")
		os.WriteFile(cfg, []byte(yaml), 0o600)
		out, errs, code := runCLI(t, "check", "--config", cfg)
		lines := strings.Split(strings.TrimSpace(out+errs), "\n")
		if code != exitFail || len(lines) != 1 || !strings.Contains(lines[0], "egressd.yaml: "+want) {
			t.Fatalf("check --config with %q: exit %d\n%s%s\nwant one line with %q", yaml, code, out, errs, want)
		}
	}
}
