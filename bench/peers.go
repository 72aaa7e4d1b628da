package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// peer is one proxy under test: how to start it, and where it listens. A
// new proxy is one more entry in availablePeers.
type peer struct {
	name string
	// start launches the proxy listening on addr and returns its process,
	// or nil for direct.
	start func(addr string) (*exec.Cmd, error)
	// target is the CONNECT target for an origin port ("" for direct).
	target func(port uint16) string
	note   string
	// reference marks a floor that nobody deploys (the bare relay): it is
	// left out of "best peer".
	reference bool
}

func (p peer) direct() bool { return p.start == nil }

// availablePeers builds the peers this machine can run, installing squid
// and tinyproxy from apt when missing (as root).
func availablePeers(l *lab, work, only string) []peer {
	byName := func(port uint16) string { return originHost + ":" + strconv.Itoa(int(port)) }
	ports := []uint16{l.tlsPort, l.sinkPort, l.srcPort}
	var peers []peer
	peers = append(peers, peer{name: "direct", note: "no proxy: the physical baseline"})

	egressd := buildGo(work, "egressd", "./cmd/egressd")
	peers = append(peers, peer{name: "egressd", target: byName, note: "decision, DNS with cache, pinned dial, ClientHello check, audit log to a file", start: func(addr string) (*exec.Cmd, error) {
		return startEgressd(l, work, egressd, addr, filepath.Join(work, "egressd-audit.log"), ports)
	}})
	floor := buildGo(work, "goproxy-floor", "./bench/floor")
	peers = append(peers, peer{name: "goproxy", target: byName, note: "goproxy accepting every CONNECT: the library floor", start: func(addr string) (*exec.Cmd, error) {
		cmd := exec.Command(floor, addr)
		cmd.Env = append(os.Environ(), "BENCH_HOST="+originHost+"=127.0.0.2")
		return cmd, cmd.Start()
	}})
	peers = append(peers, peer{name: "relay", target: byName, reference: true, note: "a bare Go CONNECT relay (read the head, dial, 200, io.Copy both ways): what this machine's kernel allows any proxy", start: func(addr string) (*exec.Cmd, error) {
		cmd := exec.Command(floor, "-relay", addr)
		cmd.Env = append(os.Environ(), "BENCH_HOST="+originHost+"=127.0.0.2")
		return cmd, cmd.Start()
	}})
	if ensureApt("squid", "squid") {
		peers = append(peers, peer{name: "squid", target: byName, note: "squid 5, dstdomain allowlist, hosts_file for the origin name", start: func(addr string) (*exec.Cmd, error) {
			return startSquid(l, work, addr, ports)
		}})
	}
	if ensureApt("tinyproxy", "tinyproxy") {
		peers = append(peers, peer{name: "tinyproxy", target: func(p uint16) string { return addr(p) }, note: "tinyproxy, filter allowlist; addressed by IP (it resolves with the system resolver)", start: func(a string) (*exec.Cmd, error) {
			return startTinyproxy(work, a, ports)
		}})
	}
	if only == "" {
		return peers
	}
	var out []peer
	for _, p := range peers {
		if p.name == "direct" || strings.Contains(","+only+",", ","+p.name+",") {
			out = append(out, p)
		}
	}
	return out
}

// baselinePeer is egressd from another binary, configured as the egressd
// peer is, with its own audit file in the same folder.
func baselinePeer(l *lab, work, bin string) peer {
	p := egressdPeer()
	p.name, p.note, p.reference = "baseline", "egressd built from "+bin+": the A/B reference for a change", true
	p.start = func(addr string) (*exec.Cmd, error) {
		return startEgressd(l, work, bin, addr, filepath.Join(work, "baseline-audit.log"), []uint16{l.tlsPort, l.sinkPort, l.srcPort})
	}
	return p
}

func buildGo(work, name, pkg string) string {
	bin := filepath.Join(work, name)
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		panic(fmt.Sprintf("build %s: %v\n%s", pkg, err, out))
	}
	return bin
}

func ensureApt(bin, pkg string) bool {
	if _, err := exec.LookPath(bin); err == nil {
		return true
	}
	if os.Geteuid() != 0 {
		fmt.Fprintf(os.Stderr, "bench: %s not installed and not root: skipping it\n", bin)
		return false
	}
	fmt.Fprintf(os.Stderr, "bench: installing %s from apt\n", pkg)
	exec.Command("apt-get", "update", "-qq").Run()
	cmd := exec.Command("apt-get", "install", "-y", "-qq", pkg)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: apt-get install %s: %v\n%s", pkg, err, out)
		return false
	}
	_, err := exec.LookPath(bin)
	return err == nil
}

func startEgressd(l *lab, work, bin, addr, auditLog string, ports []uint16) (*exec.Cmd, error) {
	dir := filepath.Join(work, "manifest")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"manifest_version":1,"id":"com.egressd.bench","version":"1.0.0","network":{"connect":["`+originHost+`"]}}`), 0o644)
	var ps []string
	for _, p := range ports {
		ps = append(ps, strconv.Itoa(int(p)))
	}
	cfg := filepath.Join(work, "egressd-"+strconv.FormatInt(time.Now().UnixNano(), 36)+".yaml")
	if auditLog == os.DevNull {
		// egressd refuses a log path that is not a regular file; its
		// stdout, which exec points at /dev/null, is the same sink.
		auditLog = "-"
	}
	// Benchmark loads are far above the default per-integration limits.
	os.WriteFile(cfg, []byte(`state_dir: `+cfg+`.state
resolvers: ["`+l.dnsAddr+`"]
audit: {path: "`+auditLog+`", checkpoints: none}
limits: {connections_per_second: 1000000, burst: 1000000, max_tunnels: 100000, max_handshakes: 100000}
integrations:
  - manifest: `+dir+`
    listen: `+addr+`
    allow_private: [127.0.0.2/32]
    allow_ports: [`+strings.Join(ps, ", ")+`]
`), 0o644)
	cmd := exec.Command(bin, "serve", "--config", cfg)
	return cmd, cmd.Start()
}

func startSquid(l *lab, work, addr string, ports []uint16) (*exec.Cmd, error) {
	var ps []string
	for _, p := range ports {
		ps = append(ps, strconv.Itoa(int(p)))
	}
	conf := filepath.Join(work, "squid.conf")
	os.WriteFile(conf, []byte(`http_port `+addr+`
pid_filename none
cache deny all
cache_mem 8 MB
access_log none
cache_log /dev/null
cache_store_log none
logfile_rotate 0
shutdown_lifetime 0 seconds
hosts_file `+l.hosts+`
dns_nameservers 127.0.0.1
max_filedescriptors 16384
acl allowed dstdomain `+originHost+`
acl bench_ports port `+strings.Join(ps, " ")+`
acl CONNECT method CONNECT
http_access allow CONNECT allowed bench_ports
http_access deny all
`), 0o644)
	cmd := exec.Command("squid", "-N", "-f", conf)
	return cmd, cmd.Start()
}

func startTinyproxy(work, addr string, ports []uint16) (*exec.Cmd, error) {
	host, port, _ := net.SplitHostPort(addr)
	filter := filepath.Join(work, "tinyproxy.filter")
	os.WriteFile(filter, []byte("^127\\.0\\.0\\.2$\n"), 0o644)
	var lines []string
	for _, p := range ports {
		lines = append(lines, "ConnectPort "+strconv.Itoa(int(p)))
	}
	user := "nobody"
	conf := filepath.Join(work, "tinyproxy.conf")
	os.WriteFile(conf, []byte(`User `+user+`
Group nogroup
Port `+port+`
Listen `+host+`
Timeout 600
MaxClients 10000
LogLevel Critical
Filter "`+filter+`"
FilterType ere
FilterDefaultDeny Yes
`+strings.Join(lines, "\n")+"\n"), 0o644)
	os.Chmod(work, 0o755)
	cmd := exec.Command("tinyproxy", "-d", "-c", conf)
	return cmd, cmd.Start()
}

// freeAddr returns a loopback address with a port nothing listens on.
func freeAddr() string {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	return ln.Addr().String()
}

// waitListening waits until addr accepts connections.
func waitListening(addr string) error {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("nothing listening on %s", addr)
}
