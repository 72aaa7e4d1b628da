package proxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy/proxytest"
)

// childNofile, in the environment, makes a test run as the child that
// TestStuckTunnelsOfOneIntegrationStayWithinTheDescriptorBudget starts,
// with that RLIMIT_NOFILE.
const childNofile = "EGRESSD_TEST_CHILD_NOFILE"

// TestStuckTunnelsOfOneIntegrationStayWithinTheDescriptorBudget: the global
// cap was (RLIMIT_NOFILE - 64) / 2, two descriptors per tunnel, but a
// tunnel whose peers do not read held its two sockets and two splice
// pipes, six descriptors (and 2 MiB of pinned pipe memory). With a limit
// of 2,000 and two integrations of max_tunnels 460 (within the cap), one
// integration's stuck tunnels ran egressd out of descriptors and the
// neighbour got 0 of 37 through. Pipes are now a budget of their own,
// counted out of the limit before the cap, and a direction that finds it
// spent copies through a small buffer.
//
// Scaled down in a child process with RLIMIT_NOFILE 256: integration A
// opens twice as many stuck directions as the pipe budget has pipes (each
// peer writes without end and never reads); once every direction waits on
// its destination, the pipes egressd holds must fit in what the limit
// leaves beside the reserve and two descriptors per connection under the
// cap, and the neighbour's request and the admin endpoint are served.
func TestStuckTunnelsOfOneIntegrationStayWithinTheDescriptorBudget(t *testing.T) {
	const nofile = 256
	if os.Getenv(childNofile) == "" {
		child := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
		child.Env = append(os.Environ(), childNofile+"="+strconv.Itoa(nofile))
		out, err := child.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS") {
			t.Fatalf("child with RLIMIT_NOFILE %d: %v\n%s", nofile, err, out)
		}
		t.Logf("child:\n%s", out)
		return
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: nofile, Max: nofile}); err != nil {
		t.Fatal(err)
	}
	stuck := pipesFor(nofile) // tunnels: two directions each, twice the pipes
	inherited := openPipes(t)
	blast := startBlastOrigin(t)
	e := newEnv(t, withConfig(func(c *policy.Config) {
		c.Integrations[0].Exemptions.AllowPorts = append(c.Integrations[0].Exemptions.AllowPorts, blast.port)
	}))
	e.resolveToOrigin("api.allowed.example")
	e.dns.Add(t, "blast.cdn.allowed.example. 60 IN A 127.0.0.2")
	gate := NewGate(DefaultMaxConnections(nofile))
	limits := e.cfg.Limits
	limits.MaxTunnels = stuck
	_, addrA := e.serveOn(gate, limits)

	waiting := map[int]bool{}
	var mu sync.Mutex
	all := make(chan struct{})
	hook := func(fd int) {
		mu.Lock()
		defer mu.Unlock()
		if !waiting[fd] {
			waiting[fd] = true
			if len(waiting) == 2*stuck {
				close(all)
			}
		}
	}
	waitingOn.Store(&hook)
	t.Cleanup(func() { waitingOn.Store(nil) })
	for i := range stuck {
		stuckTunnel(t, addrA, "blast.cdn.allowed.example:"+itoa(blast.port), blast.pool, i)
	}
	select {
	case <-all:
	case <-time.After(60 * time.Second): // a failsafe, not a measure
		t.Fatalf("only %d of %d directions ever waited on their destination", len(waiting), 2*stuck)
	}

	pipeFDs := openPipes(t) - inherited
	room := nofile - fdReserve - fdsPerConn*DefaultMaxConnections(nofile)
	t.Logf("%d stuck tunnels: egressd holds %d pipe descriptors; the limit leaves %d beside the reserve and %d connections x fdsPerConn (budget %d pipes)", stuck, pipeFDs, room, DefaultMaxConnections(nofile), pipesFor(nofile))
	if pipeFDs > room {
		t.Fatalf("%d stuck tunnels hold %d pipe descriptors, more than the %d the cap leaves for them: a neighbour can be starved of descriptors", stuck, pipeFDs, room)
	}

	c := e.client()
	defer c.CloseIdleConnections()
	resp, err := c.Get(e.originURL("api.allowed.example", "/"))
	if err != nil {
		t.Fatalf("the neighbour's request beside %d stuck tunnels: %v", stuck, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// openPipes counts this process's pipe descriptors past stdio (the test
// child's stdout and stderr are its parent's pipe), including any it
// inherited.
func openPipes(t *testing.T) int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		num, _ := strconv.Atoi(fd.Name())
		if link, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && num > 2 && strings.HasPrefix(link, "pipe:") {
			n++
		}
	}
	return n
}

// blastOrigin is a TLS origin that, after the handshake, writes without
// end and never reads.
type blastOrigin struct {
	port uint16
	pool *proxytest.CA
}

func startBlastOrigin(t *testing.T) blastOrigin {
	ca := proxytest.NewCA(t)
	ln, err := tls.Listen("tcp", "127.0.0.2:0", &tls.Config{Certificates: []tls.Certificate{ca.Leaf(t, "blast.cdn.allowed.example")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			go writeForever(c)
		}
	}()
	return blastOrigin{port: uint16(ln.Addr().(*net.TCPAddr).Port), pool: ca}
}

func writeForever(w io.Writer) {
	buf := make([]byte, 64<<10)
	for {
		if _, err := w.Write(buf); err != nil {
			return
		}
	}
}

// stuckTunnel opens a tunnel through proxy to target, completes TLS, and
// then writes without end and never reads.
func stuckTunnel(t *testing.T, proxy, target string, ca *proxytest.CA, i int) {
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n", target)
	br := bufio.NewReader(c)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	resp, err := httpReadConnect(br)
	if err != nil || resp != 200 {
		t.Fatalf("stuck tunnel %d: CONNECT %d %v", i, resp, err)
	}
	host, _, _ := net.SplitHostPort(target)
	tc := tls.Client(&bufferedConn{Conn: c, r: br}, &tls.Config{ServerName: host, RootCAs: ca.Pool})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("stuck tunnel %d: TLS: %v", i, err)
	}
	c.SetDeadline(time.Time{})
	go writeForever(tc)
}

func httpReadConnect(br *bufio.Reader) (int, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return 0, err
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		return 0, fmt.Errorf("status line %q", line)
	}
	code, _ := strconv.Atoi(f[1])
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			return 0, err
		}
		if l == "\r\n" {
			return code, nil
		}
	}
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
