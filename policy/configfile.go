package policy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/egressd/egressd/internal/safefile"
	"github.com/egressd/egressd/internal/workdir"
	"github.com/egressd/egressd/sandbox"
	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// fileConfig is the YAML wire format of the operator config. It carries the
// yaml tags; Config carries none. Every key is documented in
// configs/egressd.yaml.
type fileConfig struct {
	StateDir            string            `yaml:"state_dir"`
	Admin               string            `yaml:"admin"`
	Resolvers           []string          `yaml:"resolvers"`
	Mode                string            `yaml:"mode"`
	Audit               fileAudit         `yaml:"audit"`
	Limits              *fileLimits       `yaml:"limits"`
	Timeouts            *fileTimeouts     `yaml:"timeouts"`
	SandboxLimits       *fileSandbox      `yaml:"sandbox_limits"`
	Deny                fileDeny          `yaml:"deny"`
	NAT64Prefixes       []string          `yaml:"nat64_prefixes"`
	WildcardDNSServices []string          `yaml:"wildcard_dns_services"`
	EnvPassthrough      []string          `yaml:"env_passthrough"`
	Integrations        []fileIntegration `yaml:"integrations"`
	// Manifests serve every integration folder inside Dir, each on the
	// listener Listen names with {name} replaced by the folder's name.
	Manifests []fileIntegration `yaml:"manifests"`
	TLS       fileTLS           `yaml:"tls"`
}

type fileAudit struct {
	Path        string `yaml:"path"`
	OnFailure   string `yaml:"on_failure"`
	MaxSizeMB   int    `yaml:"max_size_mb"`
	KeyFile     string `yaml:"key_file"`
	KeyID       string `yaml:"key_id"`
	Checkpoints string `yaml:"checkpoints"`
}

type fileLimits struct {
	ConnectionsPerSecond *float64 `yaml:"connections_per_second"`
	Burst                *int     `yaml:"burst"`
	MaxTunnels           *int     `yaml:"max_tunnels"`
	MaxBrokered          *int     `yaml:"max_brokered_connections"`
	MaxHandshakes        *int     `yaml:"max_handshakes"`
	MaxConnections       *int     `yaml:"max_connections"`
	RequestsPerSecond    *float64 `yaml:"requests_per_second"`
	RequestBurst         *int     `yaml:"request_burst"`
}

type fileTimeouts struct {
	RequestHeader *time.Duration `yaml:"request_header"`
	ClientHello   *time.Duration `yaml:"client_hello"`
	Dial          *time.Duration `yaml:"dial"`
	DNS           *time.Duration `yaml:"dns"`
	Idle          *time.Duration `yaml:"idle"`
	Lifetime      *time.Duration `yaml:"lifetime"`
	Drain         *time.Duration `yaml:"drain"`
	StopGrace     *time.Duration `yaml:"stop_grace"`
	ManifestRead  *time.Duration `yaml:"manifest_read"`
}

// fileSandbox is sandbox_limits: what one "egressd run" sandbox may take.
type fileSandbox struct {
	Processes   *int `yaml:"processes"`
	OpenFiles   *int `yaml:"open_files"`
	MemoryMB    *int `yaml:"memory_mb"`
	FileSizeMB  *int `yaml:"file_size_mb"`
	TmpMB       *int `yaml:"tmp_mb"`
	HomeMB      *int `yaml:"home_mb"`
	TmpfsInodes *int `yaml:"tmpfs_inodes"`
	StateMB     *int `yaml:"state_mb"`
	// TotalMemoryMB and CPUs bound the whole sandbox (its cgroup).
	TotalMemoryMB *int     `yaml:"total_memory_mb"`
	CPUs          *float64 `yaml:"cpus"`
}

type fileDeny struct {
	Hosts []string `yaml:"hosts"`
	CIDRs []string `yaml:"cidrs"`
}

type fileIntegration struct {
	Dir          string       `yaml:"dir"` // manifests[] only
	Manifest     string       `yaml:"manifest"`
	Listen       string       `yaml:"listen"`
	AllowedPeers filePeers    `yaml:"allowed_peers"`
	Mode         string       `yaml:"mode"`
	AllowPrivate []string     `yaml:"allow_private"`
	AllowPorts   []int        `yaml:"allow_ports"`
	Widen        string       `yaml:"widen"`
	PinDigest    string       `yaml:"pin_digest"`
	Secrets      []fileSecret `yaml:"secrets"`
}

type filePeers struct {
	UIDs []uint32 `yaml:"uids"`
	GIDs []uint32 `yaml:"gids"`
}

// ConfigError lists every problem in a config file as "path: message".
type ConfigError struct{ Problems []string }

func (e *ConfigError) Error() string { return strings.Join(e.Problems, "\n") }

// maxConfigBytes bounds how much of a config file is read.
const maxConfigBytes = 1 << 20

// LoadConfig reads and parses a config file. Relative manifest paths are
// taken relative to the config file's folder, so a config and its manifests
// can move together. A relative config path is read against the kernel's
// working directory (workdir), never $PWD: the places it names key version
// memory, and one "--config cfg.yaml" typed in one folder is one place.
func LoadConfig(file string) (Config, error) {
	file, err := workdir.Abs(file)
	if err != nil {
		return Config{}, err
	}
	data, err := safefile.ReadRegular(file, maxConfigBytes)
	if err != nil {
		return Config{}, err
	}
	c, err := ParseConfig(data)
	if err != nil {
		return c, err
	}
	for i, in := range c.Integrations {
		if !filepath.IsAbs(in.Manifest) {
			c.Integrations[i].Manifest = filepath.Join(filepath.Dir(file), in.Manifest)
		}
	}
	// state_dir and audit.path are the config file's folder's, like
	// manifests: read against the working directory, a start from another
	// folder would make a new, empty version memory.
	if c.StateDir != "" && !filepath.IsAbs(c.StateDir) {
		c.StateDir = filepath.Join(filepath.Dir(file), c.StateDir)
	}
	if p := c.Audit.Path; p != "" && p != "-" && !filepath.IsAbs(p) {
		c.Audit.Path = filepath.Join(filepath.Dir(file), p)
	}
	var ps problems
	c.TLS = c.TLS.relativeTo(filepath.Dir(file))
	for i := range c.Integrations {
		readSecretValues(fmt.Sprintf("integrations[%d].secrets", i), c.Integrations[i].Secrets, filepath.Dir(file), &ps)
	}
	labels := make([]string, len(c.Integrations))
	for i := range c.Integrations {
		labels[i] = fmt.Sprintf("integrations[%d]", i)
	}
	for i, md := range c.ManifestDirs {
		dir := md.Dir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(filepath.Dir(file), dir)
		}
		c.ManifestDirs[i].Dir = dir
		expanded := expandManifestDir(fmt.Sprintf("manifests[%d]", i), dir, md.Template, &ps)
		for _, in := range expanded {
			labels = append(labels, fmt.Sprintf("manifests[%d] (folder %s)", i, filepath.Base(in.Manifest)))
		}
		c.Integrations = append(c.Integrations, expanded...)
	}
	sharedListeners(c.Integrations, labels, &ps)
	if len(ps) > 0 {
		return Config{}, &ConfigError{Problems: ps}
	}
	return c, nil
}

// folderName is what a served folder may be called: it becomes part of a
// socket path.
var folderName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })

// expandManifestDir lists dir's integration folders, in name order, as
// integrations built from the template. It runs on every load, so folders
// added or removed open or close their listeners on the next reload.
func expandManifestDir(at, dir string, tmpl Integration, ps *problems) []Integration {
	entries, err := safefile.ReadDir(dir)
	if err != nil {
		ps.add(at+".dir", err.Error())
		return nil
	}
	var out []Integration
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if !folderName().MatchString(e.Name()) {
			ps.add(at+".dir", fmt.Sprintf("folder name cannot name a socket; use letters, digits, '.', '_' and '-' (%q)", e.Name()))
			continue
		}
		in := tmpl
		in.Manifest = filepath.Join(dir, e.Name())
		in.Listen = strings.ReplaceAll(tmpl.Listen, "{name}", e.Name())
		out = append(out, in)
	}
	return out
}

// ParseConfig parses the YAML config. Unknown keys, duplicate keys, wrong
// types and bad values are all errors, reported together as a *ConfigError.
func ParseConfig(data []byte) (Config, error) {
	var fc fileConfig
	if err := yaml.UnmarshalWithOptions(data, &fc, yaml.DisallowUnknownField()); err != nil {
		return Config{}, &ConfigError{Problems: []string{yamlProblem(data, err)}}
	}
	c := DefaultConfig()
	var ps problems
	c.StateDir, c.Admin, c.Resolvers = fc.StateDir, fc.Admin, fc.Resolvers
	if _, err := netip.ParseAddrPort(fc.Admin); fc.Admin != "" && err != nil {
		ps.add("admin", fmt.Sprintf("must be an address and port like \"127.0.0.1:9090\" (%q)", fc.Admin))
	}
	for i, r := range fc.Resolvers {
		if _, err := netip.ParseAddrPort(r); err != nil {
			ps.add(fmt.Sprintf("resolvers[%d]", i), fmt.Sprintf("must be an address and port like \"127.0.0.53:53\" (%q)", r))
		}
	}
	mode, err := ParseMode(fc.Mode)
	ps.addErr("mode", err)
	c.Mode = mode
	if fc.Audit.Path != "" {
		c.Audit.Path = fc.Audit.Path
	}
	switch fc.Audit.OnFailure {
	case "", "deny":
	case "continue":
		c.Audit.OnFailure = ContinueOnAuditFailure
	default:
		ps.add("audit.on_failure", fmt.Sprintf("must be \"deny\" or \"continue\" (%q)", fc.Audit.OnFailure))
	}
	if fc.Audit.MaxSizeMB < 0 {
		ps.add("audit.max_size_mb", fmt.Sprintf("must not be negative (%d)", fc.Audit.MaxSizeMB))
	}
	c.Audit.MaxSizeMB, c.Audit.KeyFile, c.Audit.KeyID = fc.Audit.MaxSizeMB, fc.Audit.KeyFile, fc.Audit.KeyID
	switch fc.Audit.Checkpoints {
	case "":
	case "stderr", "none":
		c.Audit.Checkpoints = fc.Audit.Checkpoints
	default:
		ps.add("audit.checkpoints", fmt.Sprintf("must be \"stderr\" or \"none\" (%q)", fc.Audit.Checkpoints))
	}
	applyLimits(&c.Limits, fc.Limits, &ps)
	applyTimeouts(&c.Timeouts, fc.Timeouts, &ps)
	applySandboxLimits(&c.Sandbox, fc.SandboxLimits, &ps)
	for i, h := range fc.Deny.Hosts {
		g, err := CompileHostGlob(h)
		ps.addErr(fmt.Sprintf("deny.hosts[%d]", i), err)
		c.Deny.Hosts = append(c.Deny.Hosts, g)
	}
	c.Deny.CIDRs = parsePrefixes("deny.cidrs", fc.Deny.CIDRs, &ps)
	c.NAT64 = parseNAT64Prefixes(fc.NAT64Prefixes, &ps)
	for i, s := range fc.WildcardDNSServices {
		if s == "" || s != strings.ToLower(strings.TrimSuffix(s, ".")) || strings.ContainsAny(s, "*/: ") {
			ps.add(fmt.Sprintf("wildcard_dns_services[%d]", i), fmt.Sprintf("must be a lower-case domain like \"nip.io\" (%q)", s))
		}
	}
	c.Rules.WildcardDNSServices = fc.WildcardDNSServices
	for i, k := range fc.EnvPassthrough {
		if k == "" || strings.ContainsAny(k, "= \t") {
			ps.add(fmt.Sprintf("env_passthrough[%d]", i), fmt.Sprintf("must be a variable name (%q)", k))
		}
	}
	c.EnvPassthrough = fc.EnvPassthrough
	for i, fi := range fc.Integrations {
		c.Integrations = append(c.Integrations, parseIntegration(fmt.Sprintf("integrations[%d]", i), fi, mode, &ps))
		c.Integrations[i].Secrets = parseSecrets(fmt.Sprintf("integrations[%d].secrets", i), fi.Secrets, &ps)
	}
	c.TLS = parseTLS(fc.TLS, c.Integrations, &ps)
	for i, fm := range fc.Manifests {
		at := fmt.Sprintf("manifests[%d]", i)
		if fm.Dir == "" {
			ps.add(at+".dir", "is required: the folder whose integration folders are served")
		}
		if fm.Manifest != "" {
			ps.add(at+".manifest", "is set per folder; use dir")
		}
		if !strings.HasPrefix(fm.Listen, "unix:") || !strings.Contains(fm.Listen, "{name}") {
			ps.add(at+".listen", fmt.Sprintf("must be a unix socket path with {name}, like \"unix:/run/egressd/{name}.sock\" (%q)", fm.Listen))
			fm.Listen = "unix:/{name}"
		}
		fm.Manifest = "{dir}"
		if len(fm.Secrets) > 0 {
			ps.add(at+".secrets", "a secret is bound to one integration: list it under integrations[]")
		}
		tmpl := parseIntegration(at, fm, mode, &ps)
		c.ManifestDirs = append(c.ManifestDirs, ManifestDir{Dir: fm.Dir, Template: tmpl})
	}
	if len(ps) > 0 {
		return Config{}, &ConfigError{Problems: ps}
	}
	return c, nil
}

func parseIntegration(at string, fi fileIntegration, defaultMode Mode, ps *problems) Integration {
	in := Integration{Manifest: fi.Manifest, Listen: fi.Listen, PinDigest: fi.PinDigest,
		AllowedPeers: Peers{UIDs: fi.AllowedPeers.UIDs, GIDs: fi.AllowedPeers.GIDs}}
	if fi.Manifest == "" {
		ps.add(at+".manifest", "is required: the manifest file or its folder")
	}
	if fi.Dir != "" && fi.Manifest != "{dir}" {
		ps.add(at+".dir", "belongs under manifests:, which serves every folder in it")
	}
	if fi.Listen == "" {
		ps.add(at+".listen", "is required: \"127.0.0.1:PORT\" or \"unix:/path.sock\"")
	} else if msg := ListenProblem(fi.Listen); msg != "" {
		ps.add(at+".listen", msg)
	}
	if len(in.AllowedPeers.UIDs)+len(in.AllowedPeers.GIDs) > 0 && !strings.HasPrefix(fi.Listen, "unix:") {
		ps.add(at+".allowed_peers", "applies to unix: listeners only; any local user can reach a TCP listener")
	}
	in.Exemptions.Mode = defaultMode
	if fi.Mode != "" {
		m, err := ParseMode(fi.Mode)
		ps.addErr(at+".mode", err)
		in.Exemptions.Mode = m
	}
	in.Exemptions.AllowPrivate = parsePrefixes(at+".allow_private", fi.AllowPrivate, ps)
	for i, p := range fi.AllowPorts {
		if p < 1 || p > 65535 {
			ps.add(fmt.Sprintf("%s.allow_ports[%d]", at, i), fmt.Sprintf("must be a port from 1 to 65535 (%d)", p))
			continue
		}
		if p != DefaultPort {
			in.Exemptions.AllowPorts = append(in.Exemptions.AllowPorts, uint16(p))
		}
	}
	switch fi.Widen {
	case "", "approve":
	case "auto":
		in.Widen = WidenAuto
	default:
		ps.add(at+".widen", fmt.Sprintf("must be \"approve\" or \"auto\" (%q)", fi.Widen))
	}
	if fi.PinDigest != "" && !strings.HasPrefix(fi.PinDigest, "sha256:") {
		ps.add(at+".pin_digest", fmt.Sprintf("must be a digest as egressd check prints it, \"sha256:…\" (%q)", fi.PinDigest))
	}
	return in
}

// ListenProblem checks an integration listener however it is named (config
// file, --listen flag, manifests: template): host:port with a literal IP, or
// unix:/absolute/path. It returns "" or the message. Every interface,
// however spelled (0.0.0.0, [::], [::ffff:0.0.0.0], a zone, an empty host),
// is refused: that is an open proxy under the integration's identity.
func ListenProblem(s string) string {
	if path, ok := strings.CutPrefix(s, "unix:"); ok {
		if !strings.HasPrefix(path, "/") {
			return fmt.Sprintf("a unix socket path must be absolute (%q)", s)
		}
		return ""
	}
	if host, _, err := net.SplitHostPort(s); err == nil && host == "" {
		return fmt.Sprintf("an empty host listens on every interface, an open proxy under this integration's identity; use 127.0.0.1 (%q)", s)
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return fmt.Sprintf("must be \"IP:PORT\" or \"unix:/path.sock\" (%q)", s)
	}
	if ap.Addr().Unmap().WithZone("").IsUnspecified() {
		return fmt.Sprintf("listening on every interface makes an open proxy under this integration's identity; use 127.0.0.1 (%q)", s)
	}
	return ""
}

func applyLimits(l *Limits, f *fileLimits, ps *problems) {
	if f == nil {
		return
	}
	setPositive := func(key string, dst *int, v *int) {
		if v == nil {
			return
		}
		if *v < 1 {
			ps.add("limits."+key, fmt.Sprintf("must be at least 1 (%d)", *v))
			return
		}
		*dst = *v
	}
	if f.ConnectionsPerSecond != nil {
		if *f.ConnectionsPerSecond <= 0 {
			ps.add("limits.connections_per_second", fmt.Sprintf("must be above 0 (%v)", *f.ConnectionsPerSecond))
		} else {
			l.ConnectionsPerSecond = *f.ConnectionsPerSecond
		}
	}
	if f.RequestsPerSecond != nil {
		if *f.RequestsPerSecond <= 0 {
			ps.add("limits.requests_per_second", fmt.Sprintf("must be above 0 (%v)", *f.RequestsPerSecond))
		} else {
			l.RequestsPerSecond = *f.RequestsPerSecond
		}
	}
	setPositive("request_burst", &l.RequestBurst, f.RequestBurst)
	setPositive("burst", &l.Burst, f.Burst)
	setPositive("max_tunnels", &l.MaxTunnels, f.MaxTunnels)
	setPositive("max_handshakes", &l.MaxHandshakes, f.MaxHandshakes)
	setPositive("max_connections", &l.MaxConnections, f.MaxConnections)
	applyMaxBrokered(l, f.MaxBrokered, ps)
}

// applyMaxBrokered sets limits.max_brokered_connections: at least 1 and at
// most max_tunnels, since every brokered connection is a tunnel too. Left
// unset it is the default, or max_tunnels when that is lower, so lowering
// max_tunnels alone never makes a config invalid.
func applyMaxBrokered(l *Limits, v *int, ps *problems) {
	if v == nil {
		l.MaxBrokeredConnections = min(l.MaxBrokeredConnections, l.MaxTunnels)
		return
	}
	switch {
	case *v < 1:
		ps.add("limits.max_brokered_connections", fmt.Sprintf("must be at least 1 (%d)", *v))
	case *v > l.MaxTunnels:
		ps.add("limits.max_brokered_connections", fmt.Sprintf("must be at most limits.max_tunnels, %d (%d): each brokered connection is a tunnel too", l.MaxTunnels, *v))
	default:
		l.MaxBrokeredConnections = *v
	}
}

// maxWait is the ceiling for the timeouts that guard a connection before it
// is a tunnel: anything longer invites slow-client floods.
const maxWait = 30 * time.Second

func applyTimeouts(t *Timeouts, f *fileTimeouts, ps *problems) {
	if f == nil {
		return
	}
	set := func(key string, dst *time.Duration, v *time.Duration, ceiling time.Duration) {
		if v == nil {
			return
		}
		switch {
		case *v <= 0 && key != "lifetime":
			ps.add("timeouts."+key, fmt.Sprintf("must be above 0 (%s)", *v))
		case *v < 0:
			ps.add("timeouts."+key, fmt.Sprintf("must not be negative (%s)", *v))
		case ceiling > 0 && *v > ceiling:
			ps.add("timeouts."+key, fmt.Sprintf("must be at most %s (%s)", ceiling, *v))
		default:
			*dst = *v
		}
	}
	set("request_header", &t.RequestHeader, f.RequestHeader, maxWait)
	set("client_hello", &t.ClientHello, f.ClientHello, maxWait)
	set("dial", &t.Dial, f.Dial, maxWait)
	set("dns", &t.DNS, f.DNS, maxWait)
	set("idle", &t.Idle, f.Idle, 0)
	set("lifetime", &t.Lifetime, f.Lifetime, 0)
	set("drain", &t.Drain, f.Drain, 0)
	set("stop_grace", &t.StopGrace, f.StopGrace, 0)
	if f.ManifestRead != nil && *f.ManifestRead == 0 {
		ps.add("timeouts.manifest_read", "must be more than 0s: no manifest could ever be read")
	} else {
		set("manifest_read", &t.ManifestRead, f.ManifestRead, maxWait)
	}
}

// applySandboxLimits sets each bound the operator gives. Every bound must be
// at least 1: there is no "unlimited", since nothing fails open.
func applySandboxLimits(l *sandbox.Limits, f *fileSandbox, ps *problems) {
	if f == nil {
		return
	}
	for key, v := range map[string]struct{ dst, src *int }{
		"processes": {&l.Processes, f.Processes}, "open_files": {&l.OpenFiles, f.OpenFiles},
		"memory_mb": {&l.MemoryMB, f.MemoryMB}, "file_size_mb": {&l.FileSizeMB, f.FileSizeMB},
		"tmp_mb": {&l.TmpMB, f.TmpMB}, "home_mb": {&l.HomeMB, f.HomeMB}, "tmpfs_inodes": {&l.TmpfsInodes, f.TmpfsInodes},
		"state_mb": {&l.StateMB, f.StateMB}, "total_memory_mb": {&l.TotalMemoryMB, f.TotalMemoryMB},
	} {
		switch {
		case v.src == nil:
		case *v.src < 1:
			ps.add("sandbox_limits."+key, fmt.Sprintf("must be at least 1 (%d)", *v.src))
		default:
			*v.dst = *v.src
		}
	}
	switch c := f.CPUs; {
	case c == nil:
	case !(*c >= sandbox.MinCPUs && *c <= sandbox.MaxCPUs):
		ps.add("sandbox_limits.cpus", fmt.Sprintf("must be from %v to %v CPUs (%v)", sandbox.MinCPUs, sandbox.MaxCPUs, *c))
	default:
		l.CPUs = *c
	}
}

func parsePrefixes(at string, ss []string, ps *problems) []netip.Prefix {
	var out []netip.Prefix
	for i, s := range ss {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			ps.add(fmt.Sprintf("%s[%d]", at, i), fmt.Sprintf("must be a CIDR like \"10.0.0.0/8\" (%q)", s))
			continue
		}
		out = append(out, p.Masked())
	}
	return out
}

// parseNAT64Prefixes reads the operator's translator prefixes. Only the
// lengths RFC 6052 defines say where the IPv4 address sits.
func parseNAT64Prefixes(ss []string, ps *problems) []netip.Prefix {
	var out []netip.Prefix
	for i, s := range ss {
		p, err := netip.ParsePrefix(s)
		if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || !slices.Contains(NAT64PrefixLengths, p.Bits()) {
			ps.add(fmt.Sprintf("nat64_prefixes[%d]", i), fmt.Sprintf("must be an IPv6 prefix of /32, /40, /48, /56, /64 or /96, the lengths RFC 6052 defines (%q)", s))
			continue
		}
		out = append(out, p.Masked())
	}
	return out
}

// problems collects "path: message" strings.
type problems []string

func (ps *problems) add(path, msg string) { *ps = append(*ps, path+": "+msg) }
func (ps *problems) addErr(path string, err error) {
	if err != nil {
		ps.add(path, err.Error())
	}
}

// yamlProblem turns a go-yaml error into "path: message" by finding the
// node the error's token belongs to.
func yamlProblem(data []byte, err error) string {
	var ye yaml.Error
	if !errors.As(err, &ye) || ye.GetToken() == nil {
		return "config: " + err.Error()
	}
	tok := ye.GetToken()
	path := ""
	if f, perr := parser.ParseBytes(data, 0); perr == nil {
		for _, doc := range f.Docs {
			ast.Walk(&pathFinder{line: tok.Position.Line, col: tok.Position.Column, path: &path}, doc)
		}
	}
	if path == "" {
		path = fmt.Sprintf("line %d", tok.Position.Line)
	}
	return path + ": " + ye.GetMessage()
}

type pathFinder struct {
	line, col int
	path      *string
}

func (v *pathFinder) Visit(n ast.Node) ast.Visitor {
	if n == nil || *v.path != "" {
		return nil
	}
	if t := n.GetToken(); t != nil && t.Position.Line == v.line && t.Position.Column == v.col {
		if p := strings.TrimPrefix(strings.TrimPrefix(n.GetPath(), "$"), "."); p != "" {
			*v.path = p
			return nil
		}
	}
	return v
}
