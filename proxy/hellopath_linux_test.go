package proxy

import (
	"bytes"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"
)

// allowGate is an audit sink that holds the first allow line's write
// until released, and says when it is held.
type allowGate struct {
	mu      sync.Mutex
	held    bool
	holding chan struct{} // closed when the allow line's write is held
	release chan struct{}
}

func newAllowGate() *allowGate {
	return &allowGate{holding: make(chan struct{}), release: make(chan struct{})}
}

func (g *allowGate) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"decision":"allow"`)) {
		g.mu.Lock()
		first := !g.held
		g.held = true
		g.mu.Unlock()
		if first {
			close(g.holding)
			<-g.release
		}
	}
	return len(p), nil
}

// helloOrigin accepts one connection, hands it over, and answers its
// first record with a ServerHello once told to.
func helloOrigin(t *testing.T) (port uint16, conns chan *net.TCPConn) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = make(chan *net.TCPConn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		t.Cleanup(func() { c.Close() })
		conns <- c.(*net.TCPConn)
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port), conns
}

// queued is how many bytes c has received and not yet read (SIOCINQ).
func queued(t *testing.T, c *net.TCPConn) int {
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ierr error
	raw.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	if ierr != nil {
		t.Fatal(ierr)
	}
	return n
}

// The ClientHello now leaves from the goroutine that wrote the allow line:
// it still must not leave before the line is written. The origin is
// looked at while the line's write is held: loopback delivers a write
// into the receiver's queue before write(2) returns, so a hello sent
// ahead of its record would be queued there.
func TestTheClientHelloWaitsForItsAllowLineBeforeReachingTheOrigin(t *testing.T) {
	gate := newAllowGate()
	e := newEnv(t, func(e *env) { e.auditTo = gate })
	port, conns := helloOriginAllowed(t, e)
	c, br, resp := e.rawConnect("CONNECT api.allowed.example:" + itoa(port) + " HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	origin := <-conns // dialled before the 200
	hello := buildHello(helloSpec{names: []string{"api.allowed.example"}})
	if _, err := c.Write(hello); err != nil {
		t.Fatal(err)
	}
	<-gate.holding
	if n := queued(t, origin); n != 0 {
		close(gate.release)
		t.Fatalf("the origin holds %d bytes while the allow line is still being written", n)
	}
	close(gate.release)
	origin.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len(hello))
	if _, err := io.ReadFull(origin, got); err != nil || !bytes.Equal(got, hello) {
		t.Fatalf("the origin got %x (%v), want the hello", got, err)
	}
	// And the tunnel then works both ways.
	if _, err := origin.Write(benchServerHello); err != nil {
		t.Fatal(err)
	}
	answer := make([]byte, len(benchServerHello))
	if _, err := io.ReadFull(br, answer); err != nil || !bytes.Equal(answer, benchServerHello) {
		t.Fatalf("the client got %x (%v), want the origin's answer", answer, err)
	}
}

// The ClientHello is sent upstream by the handler that read it and wrote
// its allow line, not handed to the tunnel's goroutine first: the hand-off
// cost a scheduling round (6 to 9 µs in BenchmarkHandshakePhases) on the
// hello's way to the origin.
func TestTheClientHelloLeavesFromTheGoroutineThatRecordedIt(t *testing.T) {
	e := newEnv(t)
	port, conns := helloOriginAllowed(t, e)
	hook, stacks := firstStack()
	helloSending.Store(&hook)
	defer helloSending.Store(nil)
	c, _, resp := e.rawConnect("CONNECT api.allowed.example:" + itoa(port) + " HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	<-conns
	if _, err := c.Write(buildHello(helloSpec{names: []string{"api.allowed.example"}})); err != nil {
		t.Fatal(err)
	}
	stack := <-stacks
	if !strings.Contains(stack, "proxy.(*Server).serveTarget(") {
		t.Fatalf("the hello was sent from a goroutine other than its handler's:\n%s", stack)
	}
}

// The handler that sent the ClientHello goes on to guard the handshake
// and relays the origin's answer itself: handing the guard to a goroutine
// of its own cost a scheduling round on the way to the answer (hello and
// flight together 5 µs more over the relay in BenchmarkHandshakePhases).
func TestTheOriginsAnswerIsRelayedByTheHandlerThatSentTheHello(t *testing.T) {
	e := newEnv(t)
	port, conns := helloOriginAllowed(t, e)
	hook, stacks := firstStack()
	answerRelaying.Store(&hook)
	defer answerRelaying.Store(nil)
	c, br, resp := e.rawConnect("CONNECT api.allowed.example:" + itoa(port) + " HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	origin := <-conns
	hello := buildHello(helloSpec{names: []string{"api.allowed.example"}})
	if _, err := c.Write(hello); err != nil {
		t.Fatal(err)
	}
	origin.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(origin, make([]byte, len(hello))); err != nil {
		t.Fatal(err)
	}
	if _, err := origin.Write(benchServerHello); err != nil {
		t.Fatal(err)
	}
	answer := make([]byte, len(benchServerHello))
	if _, err := io.ReadFull(br, answer); err != nil || !bytes.Equal(answer, benchServerHello) {
		t.Fatalf("the client got %x (%v), want the origin's answer", answer, err)
	}
	stack := <-stacks
	if !strings.Contains(stack, "proxy.(*Server).serveTarget(") {
		t.Fatalf("the origin's answer was relayed from a goroutine other than the handler's:\n%s", stack)
	}
}

// While the handler guards the handshake, the connection holds one place
// under the global connection cap, the handler's: the tunnel takes its
// own only when it splices, so an origin that never answers costs the cap
// one place per connection, as before the guard ran on the handler.
func TestAConnectionWaitingForItsOriginsAnswerHoldsOnePlaceUnderTheCap(t *testing.T) {
	gate := NewGate(100)
	e := newEnv(t, func(e *env) { e.gate = gate })
	port, conns := helloOriginAllowed(t, e)
	c, br, resp := e.rawConnect("CONNECT api.allowed.example:" + itoa(port) + " HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	origin := <-conns
	hello := buildHello(helloSpec{names: []string{"api.allowed.example"}})
	if _, err := c.Write(hello); err != nil {
		t.Fatal(err)
	}
	origin.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(origin, make([]byte, len(hello))); err != nil {
		t.Fatal(err)
	}
	// The hello is out and the origin has not answered: the guard waits.
	if n := gate.open.Load(); n != 1 {
		t.Fatalf("a connection waiting for its origin's answer holds %d places under the cap, want 1", n)
	}
	// It is an open tunnel all the same, in the gauge as in OpenTunnels.
	var m dto.Metric
	e.srv.metrics.ActiveTunnels.WithLabelValues(integrationName(e.registry.Policy(e.dir))).Write(&m)
	if got := m.GetGauge().GetValue(); got != 1 || e.srv.OpenTunnels() != 1 {
		t.Fatalf("active tunnels gauge %v, open tunnels %d while the guard waits; want 1 and 1", got, e.srv.OpenTunnels())
	}
	if _, err := origin.Write(benchServerHello); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(br, make([]byte, len(benchServerHello))); err != nil {
		t.Fatal(err)
	}
}

// helloOriginAllowed starts a helloOrigin that e resolves and allows
// api.allowed.example to, on its port.
func helloOriginAllowed(t *testing.T, e *env) (port uint16, conns chan *net.TCPConn) {
	t.Helper()
	e.resolveToOrigin("api.allowed.example")
	port, conns = helloOrigin(t)
	e.cfg.Integrations[0].Exemptions.AllowPorts = append(e.cfg.Integrations[0].Exemptions.AllowPorts, port)
	e.registry.Load(e.cfg)
	return port, conns
}

// firstStack is a hook that sends the stack of the goroutine that first
// calls it.
func firstStack() (hook func(), stacks chan string) {
	stacks = make(chan string, 1)
	return func() {
		buf := make([]byte, 64<<10)
		select {
		case stacks <- string(buf[:runtime.Stack(buf, false)]):
		default:
		}
	}, stacks
}
