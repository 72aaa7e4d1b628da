package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
	"github.com/miekg/dns"
)

// TestReadyzAnswersWhileAReloadDrainsARemovedListener: a reload that
// removes an integration drains its listener, waiting for handshakes still
// resolving; it did so holding the daemon's lock, which /readyz needs, so
// the probe hung for as long as the drain. A handshake is held in DNS (the
// server never answers) while the integration is removed; Ready answers
// while the reload is still draining.
func TestReadyzAnswersWhileAReloadDrainsARemovedListener(t *testing.T) {
	e := newEnv(t)
	asked, release := make(chan struct{}, 4), make(chan struct{})
	e.dns.SetHandler(func(w dns.ResponseWriter, r *dns.Msg) bool {
		select {
		case asked <- struct{}{}:
		default:
		}
		<-release // answered only when the test is done looking
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeServerFailure)
		w.WriteMsg(m)
		return true
	})
	cfg := e.cfg
	cfg.Timeouts.DNS, cfg.Timeouts.Drain = 30*time.Second, 30*time.Second
	current := cfg
	d := &Daemon{
		LoadConfig: func() (policy.Config, error) { return current, nil },
		Registry:   policy.NewRegistry(policy.InMemory(), nil),
		Audit:      e.audit, Suppress: audit.NewSuppressor(e.audit, time.Second), Metrics: NewMetrics(nil),
		// Each server is given 2 s (miekg/dns's read timeout) before the
		// next: eight of them hold the handshake for 16 s unless released.
		Resolver: NewResolver(slices.Repeat([]string{e.dns.Addr}, 8), 30*time.Second), Gate: NewGate(1000),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	releaseDNS := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseDNS) // runs first: a failing test must not hang in Shutdown
	var listen string
	for _, a := range d.Listeners() {
		listen = a
	}
	c, err := net.Dial("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT api.allowed.example:443 HTTP/1.1\r\n\r\n")
	<-asked // the handshake is now waiting on DNS

	current.Integrations = nil
	reloaded := make(chan error, 1)
	go func() { reloaded <- d.Reload(ctx) }()
	ready := make(chan string, 1)
	go func() {
		for len(d.Listeners()) != 0 { // until the reload has taken the listener out to drain it
			time.Sleep(time.Millisecond)
		}
		_, why := d.Ready()
		ready <- why
	}()
	select {
	case why := <-ready:
		t.Logf("Ready during the drain: %q", why)
	case <-time.After(10 * time.Second): // a failsafe, well under the 16 s the handshake is held
		t.Fatal("Ready and Listeners blocked behind the reload's drain")
	}
	select {
	case <-reloaded:
		t.Fatal("the reload finished before the drain: the test did not hold a handshake")
	default:
	}
	releaseDNS()
	if err := <-reloaded; err != nil {
		t.Fatal(err)
	}
}

// TestReadyzSaysWhenTheHostsAddressesAreUnknown: when the host's addresses
// can no longer be read, every address is refused; the probe says so
// instead of "ok".
func TestReadyzSaysWhenTheHostsAddressesAreUnknown(t *testing.T) {
	e := newEnv(t)
	d := &Daemon{
		LoadConfig: func() (policy.Config, error) { return e.cfg, nil },
		Registry:   policy.NewRegistry(policy.InMemory(), nil),
		Audit:      e.audit, Metrics: NewMetrics(nil), Resolver: NewResolver([]string{e.dns.Addr}, time.Second), Gate: NewGate(100),
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	if ok, why := d.Ready(); !ok {
		t.Fatalf("not ready at start: %s", why)
	}
	d.Registry.HostAddrs().Set(nil, errors.New("netlink socket closed"))
	if ok, why := d.Ready(); ok || !strings.Contains(why, "host's own addresses are unknown") {
		t.Fatalf("Ready = %v %q", ok, why)
	}
}
