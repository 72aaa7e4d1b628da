package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
)

// BenchmarkHandshakePhases times a tunnel's life after its 200, phase by
// phase, through egressd and through a bare relay in the same process (the
// relay of bench/floor: read the head, dial, 200, io.Copy both ways), so
// the ratio holds on a loaded machine. One clock serves the client and the
// origin, so each phase is one subtraction:
//
//   - hello-µs: the ClientHello leaving the client to its last byte read
//     by the origin (egressd reads and checks it, writes the allow line to
//     an audit file, and sends it on);
//   - flight-µs: the origin's first flight (a ServerHello and 3000 bytes
//     behind it) leaving the origin to its last byte read by the client
//     (egressd's handshake guard reads it and ends its checks);
//   - up-µs, down-µs: the client's next record to the origin, and the
//     origin's echo of it back (egressd has started splicing).
//
// Each figure is the phase's median. ns/op is one tunnel through each,
// CONNECT and close included.
func BenchmarkHandshakePhases(b *testing.B) {
	origin := newPhaseOrigin(b)
	auditFile, err := os.Create(filepath.Join(b.TempDir(), "audit.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { auditFile.Close() })
	e := newEnv(b, func(e *env) { e.auditTo = auditFile },
		withConfig(func(c *policy.Config) { c.Limits.ConnectionsPerSecond, c.Limits.Burst = 1e9, 1<<30 }))
	e.resolveToOrigin("api.allowed.example")
	e.cfg.Integrations[0].Exemptions.AllowPorts = append(e.cfg.Integrations[0].Exemptions.AllowPorts, origin.port)
	e.registry.Load(e.cfg)
	relay := startBenchRelay(b)
	hello := buildHello(helloSpec{names: []string{"api.allowed.example"}})
	// Each iteration opens one tunnel through each, in turn, so both see
	// the same load.
	var viaRelay, viaEgressd phaseSamples
	b.ResetTimer()
	for b.Loop() {
		viaRelay.add(onePhasedTunnel(b, relay, origin.ln.Addr().String(), hello, origin))
		viaEgressd.add(onePhasedTunnel(b, e.addr, "api.allowed.example:"+itoa(origin.port), hello, origin))
	}
	b.StopTimer()
	viaRelay.report(b, "relay")
	viaEgressd.report(b, "egressd")
}

// phaseTimes are one tunnel's phases after its 200.
type phaseTimes struct{ hello, flight, up, down time.Duration }

// phaseSamples are the phases of every tunnel through one peer.
type phaseSamples []phaseTimes

func (p *phaseSamples) add(q phaseTimes) { *p = append(*p, q) }

// report puts the median of each phase, in µs, beside the benchmark's
// figures: a median, as a loaded machine preempts a few tunnels for
// milliseconds and a mean would be theirs.
func (p phaseSamples) report(b *testing.B, peer string) {
	for _, phase := range []struct {
		name string
		of   func(phaseTimes) time.Duration
	}{
		{"hello", func(t phaseTimes) time.Duration { return t.hello }},
		{"flight", func(t phaseTimes) time.Duration { return t.flight }},
		{"up", func(t phaseTimes) time.Duration { return t.up }},
		{"down", func(t phaseTimes) time.Duration { return t.down }},
	} {
		d := make([]time.Duration, len(p))
		for i, t := range p {
			d[i] = phase.of(t)
		}
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2])/float64(time.Microsecond), peer+"-"+phase.name+"-µs")
	}
}

// phaseOrigin is a raw origin that stamps when each of the client's
// records has arrived whole and when each of its answers leaves.
type phaseOrigin struct {
	ln    net.Listener
	port  uint16
	stamp chan originStamps
}

type originStamps struct {
	helloIn, flightOut, upIn, downOut time.Time
	err                               error
}

// phaseFlight is the origin's first flight: a ServerHello that is not a
// retry request, with the rest of a TLS 1.3 flight behind it.
var phaseFlight = append(serverHelloRecord(), appDataRecord(3000)...)

// phaseRecord is the client's record after the flight, which the origin
// echoes.
var phaseRecord = appDataRecord(64)

func newPhaseOrigin(b *testing.B) *phaseOrigin {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	o := &phaseOrigin{ln: ln, port: uint16(ln.Addr().(*net.TCPAddr).Port), stamp: make(chan originStamps, 1)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			o.stamp <- o.serve(c)
		}
	}()
	return o
}

func (o *phaseOrigin) serve(c net.Conn) (s originStamps) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if s.err = readOneRecord(c); s.err != nil {
		return s
	}
	s.helloIn = time.Now()
	s.flightOut = time.Now()
	if _, s.err = c.Write(phaseFlight); s.err != nil {
		return s
	}
	if s.err = readOneRecord(c); s.err != nil {
		return s
	}
	s.upIn = time.Now()
	s.downOut = time.Now()
	if _, s.err = c.Write(phaseRecord); s.err != nil {
		return s
	}
	io.Copy(io.Discard, c) // until the client closes
	return s
}

func readOneRecord(r io.Reader) error {
	var hdr [tlsRecordHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	_, err := io.CopyN(io.Discard, r, int64(hdr[3])<<8|int64(hdr[4]))
	return err
}

// onePhasedTunnel opens one tunnel through the proxy at proxyAddr and
// times its phases.
func onePhasedTunnel(b *testing.B, proxyAddr, target string, hello []byte, o *phaseOrigin) phaseTimes {
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		b.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n"); err != nil {
		b.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 || br.Buffered() != 0 {
		b.Fatalf("CONNECT: %v %v", resp, err)
	}
	helloOut := time.Now()
	if _, err := c.Write(hello); err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, len(phaseFlight))); err != nil {
		b.Fatal(err)
	}
	flightIn := time.Now()
	upOut := time.Now()
	if _, err := c.Write(phaseRecord); err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, len(phaseRecord))); err != nil {
		b.Fatal(err)
	}
	downIn := time.Now()
	c.Close()
	s := <-o.stamp
	if s.err != nil {
		b.Fatal(s.err)
	}
	return phaseTimes{hello: s.helloIn.Sub(helloOut), flight: flightIn.Sub(s.flightOut), up: s.upIn.Sub(upOut), down: downIn.Sub(s.downOut)}
}

// startBenchRelay serves bench/floor's relay on loopback.
func startBenchRelay(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveBenchRelay(c.(*net.TCPConn))
		}
	}()
	return ln.Addr().String()
}

func serveBenchRelay(c *net.TCPConn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		return
	}
	up, err := net.Dial("tcp", req.RequestURI)
	if err != nil {
		return
	}
	defer up.Close()
	if _, err := c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		io.Copy(c, up)
		c.CloseWrite()
		close(done)
	}()
	io.Copy(up, c)
	up.(*net.TCPConn).CloseWrite()
	<-done
}
