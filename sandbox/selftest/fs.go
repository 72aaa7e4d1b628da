package selftest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
)

func fsProbes() []probe {
	return []probe{
		{"write-host-home", LayerFS, func(_ context.Context, c *Config) (string, string) { return tryCreate(c.Nonce, c.HostHome) }},
		{"write-integration-folder", LayerFS, func(_ context.Context, c *Config) (string, string) { return tryCreate(c.Nonce, c.Integr) }},
		{"write-manifest", LayerFS, probeWriteManifest},
		{"write-system-folders", LayerFS, func(_ context.Context, c *Config) (string, string) {
			return tryCreate(c.Nonce, "/usr", "/usr/local/bin", "/bin", "/lib", "/etc", "/var", "/")
		}},
		{"read-audit-log", LayerFS, func(_ context.Context, c *Config) (string, string) { return tryRead(c.AuditLog, "") }},
		{"read-other-integration-state", LayerFS, func(_ context.Context, c *Config) (string, string) { return tryRead(c.OtherState, c.Nonce) }},
		{"read-outside-landlock-list", LayerLandlock, probeLandlock},
		{"environment-secret", LayerEnv, probeEnvSecret},
	}
}

// tryCreate creates a file in each folder and removes it at once. Any
// success is OPEN.
func tryCreate(nonce string, dirs ...string) (string, string) {
	var notes []string
	for _, d := range dirs {
		if d == "" {
			continue
		}
		p := filepath.Join(d, ".egressd-selftest-"+nonce)
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			f.Close()
			os.Remove(p)
			return opened("created %s", p)
		}
		notes = append(notes, d+": "+short(err))
	}
	if len(notes) == 0 {
		return skipped("no folder given")
	}
	return closed("%s", strings.Join(notes, "; "))
}

func probeWriteManifest(_ context.Context, c *Config) (string, string) {
	if c.Manifest == "" {
		return skipped("no manifest given")
	}
	f, err := os.OpenFile(c.Manifest, os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		f.Close() // opened for writing is enough: nothing is written
		return opened("opened %s for writing", c.Manifest)
	}
	return closed("%s: %s", c.Manifest, short(err))
}

// tryRead reads a host file; with want, only a read showing want counts.
func tryRead(path, want string) (string, string) {
	if path == "" {
		return skipped("no file given")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return closed("%s: %s", path, short(err))
	}
	if want != "" && !strings.Contains(string(data), want) {
		return closed("%s is not the host's file", path)
	}
	return opened("read %d bytes of %s", len(data), path)
}

// probeLandlock lists /, which no Landlock rule of the sandbox names: only
// Landlock stops it once the mounts are in place, so it shows whether
// Landlock is in force on this kernel.
func probeLandlock(context.Context, *Config) (string, string) {
	entries, err := os.ReadDir("/")
	if err != nil {
		return closed("listing / refused: %s", short(err))
	}
	return opened("listed / (%d entries): no Landlock rule stopped a read outside the sandbox's list", len(entries))
}

// probeEnvSecret looks for the outer's canary value in any variable.
func probeEnvSecret(_ context.Context, c *Config) (string, string) {
	if c.CanaryEnv == "" {
		return skipped("no canary variable given")
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.Contains(v, c.Nonce) {
			return opened("the launcher's undeclared variable %s crossed", k)
		}
	}
	return closed("%s did not cross", c.CanaryEnv)
}
