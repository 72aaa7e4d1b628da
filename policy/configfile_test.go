package policy

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/sandbox"
)

func TestDocumentedConfigParses(t *testing.T) {
	c, err := LoadConfig("../configs/egressd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Integrations) != 2 || c.Integrations[0].Listen != "127.0.0.1:3128" || c.Timeouts.Dial != 10*time.Second || c.Audit.Path != "-" {
		t.Fatalf("got %+v", c)
	}
	if d := DefaultConfig(); c.Limits != d.Limits || c.Timeouts != d.Timeouts || c.Sandbox != d.Sandbox {
		t.Fatal("the documented defaults differ from DefaultConfig")
	}
}

func TestConfigProblems(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"unknown_top_level_key", "listen: 1\n", `listen: unknown field "listen"`},
		{"unknown_integration_key", "integrations:\n  - manifest: x\n    listen: 127.0.0.1:1\n    domains: [evil.example]\n", `integrations[0].domains: unknown field "domains"`},
		{"open_proxy_listener", "integrations:\n  - manifest: x\n    listen: 0.0.0.0:3128\n", `integrations[0].listen: listening on every interface makes an open proxy under this integration's identity; use 127.0.0.1 ("0.0.0.0:3128")`},
		{"peers_on_tcp", "integrations:\n  - manifest: x\n    listen: 127.0.0.1:1\n    allowed_peers: {uids: [1]}\n", `integrations[0].allowed_peers: applies to unix: listeners only; any local user can reach a TCP listener`},
		{"relative_unix_path", "integrations:\n  - manifest: x\n    listen: unix:x.sock\n", `integrations[0].listen: a unix socket path must be absolute ("unix:x.sock")`},
		{"bad_mode", "mode: permissive\n", `mode: must be "enforce" or "audit" ("permissive")`},
		{"bad_cidr", "deny:\n  cidrs: [10.0.0.0/33]\n", `deny.cidrs[0]: must be a CIDR like "10.0.0.0/8" ("10.0.0.0/33")`},
		{"bad_glob", "deny:\n  hosts: [\"[a\"]\n", `deny.hosts[0]: not a valid glob ("[a"): glob: syntax error at 2: unexpected end of input`},
		{"upper_case_glob_never_matches", "deny:\n  hosts: [\"*.EVIL.example\"]\n", `deny.hosts[0]: must be a non-empty lower-case glob ("*.EVIL.example")`},
		{"slowloris_timeout", "timeouts:\n  request_header: 5m\n", `timeouts.request_header: must be at most 30s (5m0s)`},
		{"zero_timeout", "timeouts:\n  dial: 0s\n", `timeouts.dial: must be above 0 (0s)`},
		{"bad_on_failure", "audit:\n  on_failure: ignore\n", `audit.on_failure: must be "deny" or "continue" ("ignore")`},
		{"bad_port", "integrations:\n  - manifest: x\n    listen: 127.0.0.1:1\n    allow_ports: [70000]\n", `integrations[0].allow_ports[0]: must be a port from 1 to 65535 (70000)`},
		{"missing_listen", "integrations:\n  - manifest: x\n", `integrations[0].listen: is required: "127.0.0.1:PORT" or "unix:/path.sock"`},
		{"nat64_prefix_length_rfc6052_does_not_define", "nat64_prefixes: [\"2a0b:4f00::/36\"]\n", `nat64_prefixes[0]: must be an IPv6 prefix of /32, /40, /48, /56, /64 or /96, the lengths RFC 6052 defines ("2a0b:4f00::/36")`},
		{"nat64_prefix_ipv4", "nat64_prefixes: [\"10.0.0.0/8\"]\n", `nat64_prefixes[0]: must be an IPv6 prefix of /32, /40, /48, /56, /64 or /96, the lengths RFC 6052 defines ("10.0.0.0/8")`},
		{"admin_serve_cannot_listen_on", "admin: localhost\n", `admin: must be an address and port like "127.0.0.1:9090" ("localhost")`},
		{"unlimited_sandbox_bound", "sandbox_limits:\n  processes: 0\n", `sandbox_limits.processes: must be at least 1 (0)`},
		{"unlimited_sandbox_memory", "sandbox_limits:\n  total_memory_mb: 0\n", `sandbox_limits.total_memory_mb: must be at least 1 (0)`},
		{"no_cpu_for_the_sandbox", "sandbox_limits:\n  cpus: 0\n", `sandbox_limits.cpus: must be from 0.01 to 1024 CPUs (0)`},
		{"nan_cpus_is_no_bound", "sandbox_limits:\n  cpus: .nan\n", `sandbox_limits.cpus: must be from 0.01 to 1024 CPUs (NaN)`},
		{"unbounded_cpus", "sandbox_limits:\n  cpus: 1e9\n", `sandbox_limits.cpus: must be from 0.01 to 1024 CPUs (1e+09)`},
		{"no_brokered_connection_at_all", "limits:\n  max_brokered_connections: 0\n", `limits.max_brokered_connections: must be at least 1 (0)`},
		{"more_brokered_connections_than_tunnels", "limits:\n  max_tunnels: 16\n  max_brokered_connections: 17\n", `limits.max_brokered_connections: must be at most limits.max_tunnels, 16 (17): each brokered connection is a tunnel too`},
		{"bad_resolver", "resolvers: [dns.example]\n", `resolvers[0]: must be an address and port like "127.0.0.53:53" ("dns.example")`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml))
			var ce *ConfigError
			if !errors.As(err, &ce) || strings.Join(ce.Problems, "\n") != tc.want {
				t.Fatalf("got  %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestLoweringMaxTunnelsAloneKeepsTheBrokeredCapWithinIt: a config that
// sets max_tunnels below the brokered default, and no brokered cap, is
// valid, and its brokered cap is max_tunnels; one that sets both keeps both.
func TestLoweringMaxTunnelsAloneKeepsTheBrokeredCapWithinIt(t *testing.T) {
	c, err := ParseConfig([]byte("limits:\n  max_tunnels: 8\n"))
	if err != nil || c.Limits.MaxBrokeredConnections != 8 {
		t.Fatalf("max_tunnels 8 alone: brokered cap %d, %v; want 8", c.Limits.MaxBrokeredConnections, err)
	}
	c, err = ParseConfig([]byte("limits:\n  max_tunnels: 8\n  max_brokered_connections: 3\n"))
	if err != nil || c.Limits.MaxBrokeredConnections != 3 || c.Limits.MaxTunnels != 8 {
		t.Fatalf("got %+v, %v", c.Limits, err)
	}
}

func TestManifestsDirServesEachFolder(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"weather", "acme-erp", ".hidden"} {
		os.MkdirAll(filepath.Join(dir, "integrations", name), 0o755)
	}
	os.WriteFile(filepath.Join(dir, "integrations", "README"), nil, 0o644)
	cfg := filepath.Join(dir, "egressd.yaml")
	os.WriteFile(cfg, []byte("manifests:\n  - dir: integrations\n    listen: unix:/run/egressd/{name}.sock\n    allowed_peers: {uids: [1000]}\n"), 0o600)
	c, err := LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Integrations) != 2 || c.Integrations[0].Listen != "unix:/run/egressd/acme-erp.sock" || c.Integrations[1].Manifest != filepath.Join(dir, "integrations", "weather") || c.Integrations[1].AllowedPeers.UIDs[0] != 1000 {
		t.Fatalf("got %+v", c.Integrations)
	}
	os.WriteFile(cfg, []byte("manifests:\n  - dir: integrations\n    listen: 127.0.0.1:3128\n"), 0o600)
	if _, err := LoadConfig(cfg); err == nil || !strings.Contains(err.Error(), `manifests[0].listen: must be a unix socket path with {name}`) {
		t.Fatalf("err = %v", err)
	}
	os.MkdirAll(filepath.Join(dir, "integrations", "bad name"), 0o755)
	os.WriteFile(cfg, []byte("manifests:\n  - dir: integrations\n    listen: unix:/run/egressd/{name}.sock\n"), 0o600)
	if _, err := LoadConfig(cfg); err == nil || !strings.Contains(err.Error(), `folder name cannot name a socket`) {
		t.Fatalf("err = %v", err)
	}
}

// TestEveryConfigKeyIsDocumented checks that configs/egressd.yaml mentions
// every key the parser accepts, so the documented example cannot fall
// behind the code.
func TestEveryConfigKeyIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../configs/egressd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct {
			return
		}
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			key := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if key != "" && !regexp.MustCompile(`(?m)^[ #-]*`+regexp.QuoteMeta(key)+`:`).Match(doc) {
				t.Errorf("config key %q (%s.%s) is not documented in configs/egressd.yaml", key, typ.Name(), f.Name)
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeOf(fileConfig{}))
}

// TestSandboxMemoryBoundThatCouldFillFileMaxIsWarned: each mapped file a
// sandbox keeps costs it about 512 bytes of its memory bound, so a bound of
// 1024 MB lets it hold about 2.1 M struct files: fine under this host's
// 2,466,170, not under a small host's 400,000.
func TestSandboxMemoryBoundThatCouldFillFileMaxIsWarned(t *testing.T) {
	l := sandbox.DefaultLimits
	if msg := SandboxMemoryWarning(l, 2466170); msg != "" {
		t.Fatalf("warned on a host that fits: %s", msg)
	}
	want := "sandbox_limits.total_memory_mb 1024 lets one sandbox keep about 2097152 files open through mappings (512 bytes each), not under this host's fs.file-max 400000: every other process could get ENFILE; lower it to under 195"
	if msg := SandboxMemoryWarning(l, 400000); msg != want {
		t.Fatalf("got  %s\nwant %s", msg, want)
	}
	if msg := SandboxMemoryWarning(l, 0); msg != "" {
		t.Fatalf("warned with fs.file-max unknown: %s", msg)
	}
}

// TestRelativeStateDirAndAuditPathResolveAgainstTheConfigFile is the sixth
// attacker's b5: a relative state_dir was read against serve's working
// directory, so serve started from another folder made a new, empty
// version memory (a pending widening then loaded as a first load). Like
// manifests, relative paths in the config are the config file's folder's.
func TestRelativeStateDirAndAuditPathResolveAgainstTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "egressd.yaml")
	if err := os.WriteFile(file, []byte("state_dir: st\naudit: {path: logs/audit.log}\nintegrations:\n  - manifest: m\n    listen: 127.0.0.1:0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	c, err := LoadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	if c.StateDir != filepath.Join(dir, "st") || c.Audit.Path != filepath.Join(dir, "logs", "audit.log") {
		t.Fatalf("state_dir %q, audit.path %q: not under %s", c.StateDir, c.Audit.Path, dir)
	}
}
