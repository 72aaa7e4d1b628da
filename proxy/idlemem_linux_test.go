package proxy

import (
	"bytes"
	"flag"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"

	"github.com/egressd/egressd/policy"
)

// What an idle tunnel costs egressd in memory, and what one connection
// costs it in allocations, measured in process against real sockets: the
// figures bench/ reads from RSS (idle tunnel memory) and strace, here
// deterministic enough to guard.

// idleTunnels is how many tunnels one measurement holds open.
const idleTunnels = 500

// idleProfile, if set, is where measure writes a heap profile while the
// tunnels are open: what holds their memory (with -memprofilerate=1,
// go tool pprof -sample_index=inuse_space).
var idleProfile = flag.String("idleprofile", "", "write a heap profile of the open idle tunnels to this file")

// BenchmarkIdleTunnelMemory opens idleTunnels real CONNECT tunnels through
// the Server to a loopback origin, completes each ClientHello exchange,
// waits until every direction has parked in splice, collects garbage, and
// reports egressd's heap and stacks per tunnel (B/tunnel) and goroutines
// per tunnel. The test side's own sockets are measured with the same
// number of direct connections and left out.
//
//	go test -run XXX -bench BenchmarkIdleTunnelMemory -benchtime=3x ./proxy/
func BenchmarkIdleTunnelMemory(b *testing.B) {
	l := newIdleLab(b)
	var sum idleCost
	for b.Loop() {
		m := l.measure(idleTunnels)
		sum.heap += m.heap
		sum.stacks += m.stacks
		sum.goroutines += m.goroutines
	}
	n := float64(b.N)
	b.ReportMetric((sum.heap+sum.stacks)/n, "B/tunnel")
	b.ReportMetric(sum.heap/n, "heap-B/tunnel")
	b.ReportMetric(sum.stacks/n, "stack-B/tunnel")
	b.ReportMetric(sum.goroutines/n, "goroutines/tunnel")
}

// BenchmarkTunnelLifecycle is one whole connection through egressd:
// CONNECT, decision, cached DNS, dial, 200, ClientHello check, the
// origin's answer, splice, the client's close, and the close record. Its
// allocs/op and B/op (-benchmem) are the process's, the test's dial and
// origin included: compare them with the direct sub-benchmark.
//
//	go test -run XXX -bench BenchmarkTunnelLifecycle -benchmem -benchtime=2000x ./proxy/
func BenchmarkTunnelLifecycle(b *testing.B) {
	for _, via := range []string{"direct", "egressd"} {
		b.Run(via, func(b *testing.B) {
			l := newIdleLab(b)
			open, records := l.direct, 0
			if via == "egressd" {
				open, records = l.throughEgressd, 2
			}
			b.ReportAllocs()
			for b.Loop() {
				l.lifecycle(open, records)
			}
		})
	}
}

// idleLab is an egressd whose audit lines are counted and dropped, and an
// origin that answers each ClientHello and then either holds the
// connection without a goroutine (idle) or closes it when the client does.
type idleLab struct {
	tb     testing.TB
	e      *env
	lines  *lineCounter
	origin *net.TCPListener
	target string // CONNECT's target
	hello  []byte

	mu   sync.Mutex
	held []net.Conn // origin ends of idle connections
	hold bool       // hold the next connections instead of closing at EOF
}

func newIdleLab(tb testing.TB) *idleLab {
	lines := &lineCounter{}
	lines.cond.L = &lines.mu
	e := newEnv(tb, withConfig(func(c *policy.Config) {
		c.Limits.ConnectionsPerSecond, c.Limits.Burst = 1e9, 1<<30
		c.Limits.MaxTunnels = 4 * idleTunnels
	}), func(e *env) { e.auditTo = lines })
	e.resolveToOrigin("api.allowed.example")
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	p := uint16(ln.Addr().(*net.TCPAddr).Port)
	e.cfg.Integrations[0].Exemptions.AllowPorts = append(e.cfg.Integrations[0].Exemptions.AllowPorts, p)
	e.registry.Load(e.cfg)
	l := &idleLab{tb: tb, e: e, lines: lines, origin: ln.(*net.TCPListener),
		target: "api.allowed.example:" + itoa(p),
		hello:  buildHello(helloSpec{names: []string{"api.allowed.example"}})}
	go l.serve()
	tb.Cleanup(l.closeHeld)
	return l
}

// serve answers each connection's ClientHello on the accept goroutine (the
// lab opens one connection at a time), then holds it or sinks it to EOF.
func (l *idleLab) serve() {
	for {
		c, err := l.origin.Accept()
		if err != nil {
			return
		}
		hdr := make([]byte, 5)
		if _, err := io.ReadFull(c, hdr); err != nil {
			c.Close()
			continue
		}
		io.CopyN(io.Discard, c, int64(hdr[3])<<8|int64(hdr[4]))
		c.Write(benchServerHello)
		l.mu.Lock()
		if l.hold {
			l.held = append(l.held, c)
			c = nil
		}
		l.mu.Unlock()
		if c != nil {
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}
}

func (l *idleLab) closeHeld() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.held {
		c.Close()
	}
	l.held = l.held[:0]
}

// direct opens a connection straight to the origin and exchanges hellos.
func (l *idleLab) direct() net.Conn {
	c, err := net.Dial("tcp", l.origin.Addr().String())
	if err != nil {
		l.tb.Fatal(err)
	}
	l.exchangeHellos(c)
	return c
}

var connectEstablished = []byte("HTTP/1.1 200 Connection established\r\n\r\n")

// throughEgressd opens a tunnel and exchanges hellos through it. egressd's
// answer is read to its exact length, so no reader outlives the call.
func (l *idleLab) throughEgressd() net.Conn {
	c, err := net.Dial("tcp", l.e.addr)
	if err != nil {
		l.tb.Fatal(err)
	}
	if _, err := io.WriteString(c, "CONNECT "+l.target+" HTTP/1.1\r\nHost: "+l.target+"\r\n\r\n"); err != nil {
		l.tb.Fatal(err)
	}
	got := make([]byte, len(connectEstablished))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, connectEstablished) {
		l.tb.Fatalf("CONNECT answered %q, %v", got, err)
	}
	l.exchangeHellos(c)
	return c
}

func (l *idleLab) exchangeHellos(c net.Conn) {
	if _, err := c.Write(l.hello); err != nil {
		l.tb.Fatal(err)
	}
	got := make([]byte, len(benchServerHello))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, benchServerHello) {
		l.tb.Fatalf("origin answered %q, %v", got, err)
	}
}

// lifecycle runs one connection from dial until it has written its
// records (egressd's connect and close) and the client has closed.
func (l *idleLab) lifecycle(open func() net.Conn, records int) {
	lines := l.lines.count()
	c := open()
	c.Close()
	l.lines.waitFor(lines + records)
}

// idleCost is egressd's cost per idle tunnel: heap (HeapInuse) and
// goroutine stacks (StackInuse) in bytes, and goroutines.
type idleCost struct{ heap, stacks, goroutines float64 }

func (c idleCost) bytes() float64 { return c.heap + c.stacks }

// measure opens n idle connections directly and then n tunnels, and
// returns what the tunnels cost beyond the direct connections. Each
// reading is taken once every tunnel direction has parked in splice.
func (l *idleLab) measure(n int) idleCost { return l.measureWhile(n, nil) }

// measureWhile is measure, calling whileOpen (if set) once every tunnel
// has parked, after the reading.
func (l *idleLab) measureWhile(n int, whileOpen func()) idleCost {
	parked := make(chan struct{}, 2*n)
	hook := func() {
		select {
		case parked <- struct{}{}:
		default: // more than the tunnels' directions: not ours to count
		}
	}
	idleOn.Store(&hook)
	defer idleOn.Store(nil)

	open := func(dial func() net.Conn, directions int) (heap, stacks, goroutines int) {
		l.mu.Lock()
		l.hold = true
		l.held = make([]net.Conn, 0, n)
		l.mu.Unlock()
		conns := make([]net.Conn, 0, n)
		mem0, g0 := memoryInUse()
		for range n {
			conns = append(conns, dial())
		}
		for range directions {
			<-parked
		}
		mem, g := memoryInUse()
		if directions > 0 && *idleProfile != "" {
			writeHeapProfile(l.tb, *idleProfile)
		}
		if directions > 0 && whileOpen != nil {
			whileOpen()
		}
		l.mu.Lock()
		l.hold = false
		l.mu.Unlock()
		lines := l.lines.count()
		for _, c := range conns {
			c.Close()
		}
		l.closeHeld()
		if directions > 0 {
			l.lines.waitFor(lines + n) // every tunnel's close record
		}
		return mem.heap - mem0.heap, mem.stacks - mem0.stacks, g - g0
	}
	directHeap, directStacks, directG := open(l.direct, 0)
	heap, stacks, g := open(l.throughEgressd, 2*n)
	per := func(tunnels, direct int) float64 { return float64(tunnels-direct) / float64(n) }
	return idleCost{heap: per(heap, directHeap), stacks: per(stacks, directStacks), goroutines: per(g, directG)}
}

// inUse is the heap and the goroutine stacks in use, in bytes.
type inUse struct{ heap, stacks int }

// memoryInUse is the heap and goroutine stacks in use after a full
// collection (which also shrinks idle stacks), and the goroutine count.
func memoryInUse() (inUse, int) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return inUse{heap: int(ms.HeapInuse), stacks: int(ms.StackInuse)}, runtime.NumGoroutine()
}

func writeHeapProfile(tb testing.TB, path string) {
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		tb.Fatal(err)
	}
}

// lineCounter is an audit sink that keeps no line, only their number.
type lineCounter struct {
	mu   sync.Mutex
	cond sync.Cond
	n    int
}

func (w *lineCounter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.n += bytes.Count(p, []byte{'\n'})
	w.cond.Broadcast()
	w.mu.Unlock()
	return len(p), nil
}

func (w *lineCounter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

func (w *lineCounter) waitFor(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.n < n {
		w.cond.Wait()
	}
}

// Bounds of the guards below, with headroom over what the cuts of issue 16
// measured (go test -bench 'BenchmarkIdleTunnelMemory|BenchmarkTunnelLifecycle'):
// 5.0-5.8 KiB per idle tunnel once warm (1.5-1.9 KiB heap, two stacks of
// 2 KiB, or 4 KiB when the runtime's adaptive starting size was large at
// the last collection), and 170 allocations, 18.1 KB per connection (the
// test's 28 and 1.1 KB included; 196 and 19.8 KB before the route cache,
// whose netlink query was 24 of them, and the origin's flight read
// through a pooled buffer, 2 more).
// Stacks move in whole stacks; which goroutines are under the splice is
// TestAnIdleTunnelSplicesOnFreshGoroutinesWithNothingUnderThePump's.
const (
	maxIdleTunnelBytes     = 8 << 10
	maxIdleTunnelGoroutine = 2
	maxConnectionAllocs    = 180
	maxConnectionBytes     = 19_500
)

func TestAnIdleTunnelHoldsTwoGoroutinesAndUnderEightKiB(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector grows frames and moves values to the heap: the bound is for the build that ships")
	}
	l := newIdleLab(t)
	l.measure(idleTunnels) // warm up: the tunnel set, the pools and the lab grow to their size once
	m := l.measure(idleTunnels)
	t.Logf("per idle tunnel: %.0f bytes (%.0f heap, %.0f stacks), %.2f goroutines", m.bytes(), m.heap, m.stacks, m.goroutines)
	if m.goroutines > maxIdleTunnelGoroutine {
		t.Errorf("%.2f goroutines per idle tunnel, want at most %d", m.goroutines, maxIdleTunnelGoroutine)
	}
	if m.bytes() > maxIdleTunnelBytes {
		t.Errorf("%.0f bytes per idle tunnel (heap %.0f, stacks %.0f), want at most %d", m.bytes(), m.heap, m.stacks, maxIdleTunnelBytes)
	}
}

// The runtime never shrinks a stack below four times what it holds plus
// 800 bytes, so a goroutine that grew its stack checking the handshake and
// then parks in splice keeps 4 KiB or more for the tunnel's life. An idle
// tunnel's two splicing goroutines must be fresh ones, with nothing but
// the pump under them.
func TestAnIdleTunnelSplicesOnFreshGoroutinesWithNothingUnderThePump(t *testing.T) {
	l := newIdleLab(t)
	const n = 50
	var dump []byte
	l.measureWhile(n, func() {
		dump = make([]byte, 4<<20)
		dump = dump[:runtime.Stack(dump, true)]
	})
	pumps := 0
	for _, g := range strings.Split(string(dump), "\n\n") {
		if !strings.Contains(g, "proxy.pump(") {
			continue
		}
		pumps++
		lines := strings.Split(strings.TrimSpace(g), "\n")
		// The last lines are the goroutine's first function (name, then
		// file:line) and "created by" (name, file:line).
		if len(lines) < 4 || !strings.HasPrefix(lines[len(lines)-2], "created by github.com/egressd/egressd/proxy.(*tunnel).start") {
			t.Fatalf("a pump on a goroutine the tunnel did not start for it:\n%s", g)
		}
		bottom := lines[len(lines)-4]
		if !strings.Contains(bottom, "proxy.(*splicers).pumpUp(") && !strings.Contains(bottom, "proxy.(*splicers).pumpDown(") {
			t.Fatalf("a pump with %q under it:\n%s", bottom, g)
		}
	}
	if pumps != 2*n {
		t.Fatalf("%d goroutines in pump for %d idle tunnels, want %d", pumps, n, 2*n)
	}
}

func TestAConnectionThroughEgressdAllocatesUnderItsBound(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector moves values to the heap: the bound is for the build that ships")
	}
	l := newIdleLab(t)
	const runs = 200
	perConnection := func(open func() net.Conn, records int) (allocs, bytes float64) {
		for range 10 { // warm the resolver cache, the pools, the stacks
			l.lifecycle(open, records)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			l.lifecycle(open, records)
		}
		runtime.ReadMemStats(&after)
		return float64(after.Mallocs-before.Mallocs) / runs, float64(after.TotalAlloc-before.TotalAlloc) / runs
	}
	directAllocs, directBytes := perConnection(l.direct, 0)
	allocs, bytes := perConnection(l.throughEgressd, 2)
	t.Logf("per connection: %.0f allocations, %.0f bytes (direct: %.0f, %.0f)", allocs, bytes, directAllocs, directBytes)
	if allocs > maxConnectionAllocs {
		t.Errorf("%.0f allocations per connection through egressd (the test's own %.0f included), want at most %d", allocs, directAllocs, maxConnectionAllocs)
	}
	if bytes > maxConnectionBytes {
		t.Errorf("%.0f bytes allocated per connection through egressd (the test's own %.0f included), want at most %d", bytes, directBytes, maxConnectionBytes)
	}
}
