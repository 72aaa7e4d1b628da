package selftest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// IntegrationID is the built-in probe integration's id.
const IntegrationID = "dev.egressd.selftest"

// canaryEnv is a launcher variable no manifest declares.
const canaryEnv = "EGRESSD_SELFTEST_CANARY_TOKEN"

// Beacons are the outer half: things on the host a sandboxed program must
// not reach, each of which notes whether it was reached.
type Beacons struct {
	Config Config
	// DNSAddr is an upstream DNS server that records every name it is
	// asked; "egressd selftest" makes the proxy use it, so a name that
	// reaches upstream is seen.
	DNSAddr string
	Dir     string // the run's folder: integration, state, audit log, sockets

	listeners []net.Listener
	dns       []*dns.Server
	leaked    int
	tty       *lentTerminal
	out       *capturedStdout
	usr2      chan os.Signal
	signals   atomic.Int32
	reached   sync.Map // beacon name -> true
	names     sync.Map // names asked upstream that carry the nonce
	wg        sync.WaitGroup
}

// StartBeacons lays out dir (which must be empty and reachable by the
// sandbox's user) and starts every beacon.
func StartBeacons(dir string, targets Targets, hostDNS []string) (_ *Beacons, err error) {
	nonce := make([]byte, 8)
	rand.Read(nonce)
	b := &Beacons{Dir: dir, leaked: -1}
	n := "st" + hex.EncodeToString(nonce)
	home, _ := os.UserHomeDir()
	host, _ := os.Hostname()
	b.Config = Config{Nonce: n, Targets: targets, HostDNS: hostDNS, CanaryEnv: canaryEnv, HostHome: home, HostName: host,
		AuditLog: filepath.Join(dir, "audit.log"), HostMarker: filepath.Join(dir, "egressd-selftest-host-"+n)}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	if err := os.WriteFile(b.Config.HostMarker, []byte(n), 0o644); err != nil {
		return nil, err
	}
	other := filepath.Join(dir, "state", "sandbox", "com.other.integration")
	if err := os.MkdirAll(other, 0o755); err != nil {
		return nil, err
	}
	b.Config.OtherState = filepath.Join(other, "secret")
	if err := os.WriteFile(b.Config.OtherState, []byte("other integration's secret "+n), 0o644); err != nil {
		return nil, err
	}
	greeting := "egressd-selftest-beacon " + n + "\n"
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b.serve("host-loopback-service", tcp, greeting)
	b.Config.Loopback = tcp.Addr().String()
	sock := filepath.Join(dir, "host.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	os.Chmod(sock, 0o777) // any uid could connect, if it could see it
	b.serve("host-unix-socket-path", ul, greeting)
	b.Config.UnixPath = sock
	b.Config.UnixAbs = "egressd-selftest-" + n
	al, err := net.Listen("unix", "@"+b.Config.UnixAbs)
	if err != nil {
		return nil, err
	}
	b.serve("host-unix-socket-abstract", al, greeting)
	if err := b.startDNS(); err != nil {
		return nil, err
	}
	if err := b.leak(filepath.Join(dir, "leaked")); err != nil {
		return nil, err
	}
	b.usr2 = make(chan os.Signal, 16)
	signal.Notify(b.usr2, unix.SIGUSR2)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for range b.usr2 {
			b.signals.Add(1)
		}
	}()
	// egressd builds the program's environment from its own, so the
	// canary goes there; Close removes it.
	os.Setenv(canaryEnv, "canary-"+n)
	return b, nil
}

// serve greets each connection with the nonce and notes the reach.
func (b *Beacons) serve(name string, ln net.Listener, greeting string) {
	b.listeners = append(b.listeners, ln)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.reached.Store(name, true)
			c.Write([]byte(greeting))
			c.Close()
		}
	}()
}

// startDNS answers every name with MarkerAddr and notes those that carry
// the nonce.
func (b *Beacons) startDNS() error {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	b.DNSAddr = pc.LocalAddr().String()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		for _, qq := range q.Question {
			name := strings.ToLower(qq.Name)
			if strings.Contains(name, b.Config.Nonce) {
				b.names.Store(strings.TrimSuffix(name, "."), true)
			}
			if qq.Qtype == dns.TypeA {
				rr, _ := dns.NewRR(fmt.Sprintf("%s 5 IN A %s", qq.Name, MarkerAddr))
				m.Answer = append(m.Answer, rr)
			}
		}
		w.WriteMsg(m)
	})
	s := &dns.Server{PacketConn: pc, Handler: h}
	b.dns = append(b.dns, s)
	started := make(chan struct{})
	s.NotifyStartedFunc = func() { close(started) }
	go s.ActivateAndServe()
	<-started
	return nil
}

// leak opens a file holding the nonce at a high descriptor number without
// close-on-exec, as a careless launcher would.
func (b *Beacons) leak(path string) error {
	if err := os.WriteFile(path, []byte("leaked "+b.Config.Nonce), 0o644); err != nil {
		return err
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if b.leaked, err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD, 200); err != nil {
		return err
	}
	b.Config.LeakedFDs = []int{b.leaked}
	return nil
}

// Close stops every beacon.
func (b *Beacons) Close() {
	for _, ln := range b.listeners {
		ln.Close()
	}
	for _, s := range b.dns {
		s.Shutdown()
	}
	if b.usr2 != nil {
		signal.Stop(b.usr2)
		close(b.usr2)
	}
	if b.leaked >= 0 {
		unix.Close(b.leaked)
	}
	b.ReturnStdin()
	b.ReturnStdout()
	if b.tty != nil {
		b.tty.close()
	}
	os.Unsetenv(canaryEnv)
	b.wg.Wait()
}

// Judge reads the inner half's results from what the program wrote to its
// standard output (the last results line) and adds what the beacons saw: a
// beacon reached, a name seen upstream, a signal received is OPEN whatever
// the program believed. Missing results are OPEN, never closed.
func (b *Beacons) Judge(output []byte, exitCode int) ([]Result, Bounds) {
	in, err := lastResults(output)
	if err != nil {
		return []Result{{Name: "battery", Layer: "-", Result: Open,
			Detail: fmt.Sprintf("the probes wrote no results (exit status %d): %v; nothing can be said to be closed", exitCode, err)}}, in.Bounds
	}
	if !in.Done {
		in.Probes = append(in.Probes, Result{Name: "signal-init-sigquit", Layer: LayerPID, Result: Open,
			Detail: fmt.Sprintf("the sandbox died when the program sent its init SIGQUIT (exit status %d)", exitCode)})
	}
	refused := b.refusedInAudit()
	for i := range in.Probes {
		p := &in.Probes[i]
		if p.Result == Open && len(p.Reached) > 0 && !strings.Contains(p.Detail, leftNote) && allIn(p.Reached, refused) {
			p.Result, p.Detail = Closed, "egressd's capture accepted and refused every attempt, and its audit log records each: "+p.Detail
		}
		if _, ok := b.reached.Load(p.Name); ok {
			p.Result, p.Detail = Open, "the host's listener accepted a connection from the program; "+p.Detail
		}
		switch p.Name {
		case "signal-supervisor":
			if n := b.signals.Load(); n > 0 {
				p.Result, p.Detail = Open, fmt.Sprintf("egressd received %d signal(s) from the program", n)
			}
		case "terminal":
			if b.tty == nil {
				break
			}
			// The program shares the terminal: what it changed while it
			// ran (its own report) is OPEN, though egressd restores the
			// terminal at exit; a terminal left broken after exit is too.
			if ch := b.tty.changes(); len(ch) > 0 {
				p.Result, p.Detail = Open, "the terminal egressd was given is left broken: "+strings.Join(ch, ", ")
			}
		case "dns-denied-name", "dns-random-subdomains":
			if seen := b.upstream(p.Name == "dns-random-subdomains"); len(seen) > 0 {
				p.Result, p.Detail = Open, "the upstream resolver was asked for "+strings.Join(limit(seen, 3), ", ")
			}
		}
	}
	in.Probes = append(in.Probes, b.attemptsAudited(refused))
	return in.Probes, in.Bounds
}

// attemptsAudited checks that every direct attempt the battery made (TCP,
// IPv6, UDP, the metadata address, raw resolvers) is in egressd's audit
// log as a refusal: a reviewer must see a program that tried to get out,
// not only one that got out.
func (b *Beacons) attemptsAudited(refused []string) Result {
	r := Result{Name: "attempts-audited", Layer: LayerAudit}
	t := b.Config.Targets
	var missing []string
	tried := 0
	for _, group := range [][]string{t.TCP443, t.TCPOther, t.IPv6, t.UDP, t.Metadata, t.PublicDNS, b.Config.HostDNS} {
		for _, d := range group {
			tried++
			if !allIn([]string{d}, refused) {
				missing = append(missing, d)
			}
		}
	}
	if tried == 0 {
		r.Result, r.Detail = skipped("no direct attempt was made")
	} else if len(missing) > 0 {
		r.Result, r.Detail = opened("no refusal in the audit log for %s", strings.Join(limit(missing, 4), ", "))
	} else {
		r.Result, r.Detail = closed("every direct attempt is in the audit log as a refusal")
	}
	return r
}

// refusedInAudit is every line of egressd's audit log that records a
// refusal of a connection the program made itself: the destinations the
// supervisor saw and denied. A refused CONNECT through the explicit proxy
// says nothing about a direct attempt to the same address, so it is left out.
func (b *Beacons) refusedInAudit() []string {
	data, err := os.ReadFile(b.Config.AuditLog)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, `"decision":"deny"`) && !strings.Contains(line, `"method":"CONNECT"`) {
			out = append(out, line)
		}
	}
	return out
}

// allIn reports whether every destination appears in some refusal.
func allIn(dests, refusals []string) bool {
	for _, d := range dests {
		found := false
		for _, line := range refusals {
			if strings.Contains(line, d) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// upstream lists the nonce names the DNS beacon was asked: the random
// subdomains (x…) or the plain denied name.
func (b *Beacons) upstream(random bool) []string {
	var out []string
	b.names.Range(func(k, _ any) bool {
		name := k.(string)
		if strings.HasPrefix(name, b.Config.Nonce) != random && !strings.Contains(name, ".raw.") {
			out = append(out, name)
		}
		return true
	})
	return out
}
