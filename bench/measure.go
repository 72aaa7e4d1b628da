package main

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// measure runs one round of the selected figures against p.
func measure(l *lab, p peer, cfg config, r samples) error {
	proxyAddr := ""
	var cmd *exec.Cmd
	if !p.direct() {
		proxyAddr = freeAddr()
		var err error
		if cmd, err = p.start(proxyAddr); err != nil {
			return err
		}
		defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
		if err := waitListening(proxyAddr); err != nil {
			return err
		}
		// One warm-up connection: caches, lazy initialisation.
		if _, _, err := handshake(l, p, proxyAddr); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	pid := 0
	if cmd != nil {
		pid = cmd.Process.Pid
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	if selected(cfg.groups, groupC1) {
		lat, phase, _, err := handshakes(l, p, proxyAddr, cfg.handshakes, 1)
		if err != nil {
			return err
		}
		r.add("p50c1", ms(percentile(lat, 50)))
		r.add("p99c1", ms(percentile(lat, 99)))
		if pid != 0 {
			r.add("phase", ms(percentile(phase, 50)))
		}
	}
	if selected(cfg.groups, groupC32) {
		user0, sys0 := cpuTimes(pid)
		lat, _, elapsed, err := handshakes(l, p, proxyAddr, cfg.conns, 32)
		if err != nil {
			return err
		}
		r.add("p50c32", ms(percentile(lat, 50)))
		r.add("p99c32", ms(percentile(lat, 99)))
		r.add("cps", float64(cfg.conns)/elapsed.Seconds())
		if pid != 0 {
			user, sys := cpuTimes(pid)
			r.add("cpuConn", float64(user+sys-user0-sys0)/1e3/float64(cfg.conns))
			r.add("kernelConn", float64(sys-sys0)/1e3/float64(cfg.conns))
		}
	}
	if selected(cfg.groups, groupBulk) {
		for _, source := range []bool{false, true} {
			cpu0 := cpuTime(pid)
			mbs, err := bulk(l, p, proxyAddr, cfg.bulk, source)
			if err != nil {
				return err
			}
			r.add(map[bool]string{false: "up", true: "down"}[source], mbs)
			if pid != 0 {
				r.add("cpuGiB", (cpuTime(pid)-cpu0).Seconds()/(float64(cfg.bulk)/(1<<30)))
			}
		}
	}
	if pid != 0 && selected(cfg.groups, groupIdle) {
		kib, err := idleMemory(l, p, proxyAddr, pid, cfg.idleTunnels)
		if err != nil {
			return err
		}
		r.add("idleKiB", kib)
	}
	return nil
}

// dialVia opens a tunnel to port through the proxy (or directly), and
// returns the connection and how long the CONNECT phase took.
func dialVia(p peer, proxyAddr string, port uint16) (net.Conn, time.Duration, error) {
	start := time.Now()
	if p.direct() {
		c, err := net.Dial("tcp", addr(port))
		return c, 0, err
	}
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		return nil, 0, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", p.target(port), p.target(port))
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, 0, err
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			c.Close()
			return nil, 0, err
		}
		if line == "\r\n" {
			break
		}
	}
	if !strings.Contains(status, " 200") {
		c.Close()
		return nil, 0, fmt.Errorf("CONNECT: %s", strings.TrimSpace(status))
	}
	c.SetDeadline(time.Time{})
	return c, time.Since(start), nil
}

// handshake is one CONNECT + TLS 1.3 handshake + 1-byte echo.
func handshake(l *lab, p peer, proxyAddr string) (time.Duration, time.Duration, error) {
	start := time.Now()
	c, phase, err := dialVia(p, proxyAddr, l.tlsPort)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	tc := tls.Client(c, &tls.Config{ServerName: originHost, RootCAs: l.ca.Pool})
	if err := tc.Handshake(); err != nil {
		return 0, 0, err
	}
	tc.Write([]byte{'x'})
	b := make([]byte, 1)
	if _, err := io.ReadFull(tc, b); err != nil {
		return 0, 0, err
	}
	return time.Since(start), phase, nil
}

func handshakes(l *lab, p peer, proxyAddr string, n, conc int) (lat, phase []time.Duration, elapsed time.Duration, err error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	jobs := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		jobs <- struct{}{}
	}
	close(jobs)
	start := time.Now()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				d, ph, e := handshake(l, p, proxyAddr)
				mu.Lock()
				if e != nil && err == nil {
					err = e
				}
				lat, phase = append(lat, d), append(phase, ph)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return lat, phase, time.Since(start), err
}

// bulk moves n raw bytes up (to the sink) or down (from the source) through
// one tunnel, after a real ClientHello, and returns MB/s.
func bulk(l *lab, p peer, proxyAddr string, n int64, down bool) (float64, error) {
	port := l.sinkPort
	if down {
		port = l.srcPort
	}
	c, _, err := dialVia(p, proxyAddr, port)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	start := time.Now()
	if err := helloExchange(c); err != nil {
		return 0, err
	}
	binary.Write(c, binary.BigEndian, n)
	if down {
		if err := sink(c, n); err != nil {
			return 0, err
		}
	} else {
		if err := send(c, n); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			return 0, err
		}
	}
	return float64(n) / 1e6 / time.Since(start).Seconds(), nil
}

// idleMemory opens k idle tunnels and returns the proxy's RSS growth per
// tunnel in KiB.
func idleMemory(l *lab, p peer, proxyAddr string, pid, k int) (float64, error) {
	before := rssKiB(pid)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < k; i++ {
		c, _, err := dialVia(p, proxyAddr, l.sinkPort)
		if err != nil {
			return 0, fmt.Errorf("idle tunnel %d: %w", i, err)
		}
		if err := helloExchange(c); err != nil {
			return 0, fmt.Errorf("idle tunnel %d: %w", i, err)
		}
		binary.Write(c, binary.BigEndian, int64(0))
		conns = append(conns, c)
	}
	time.Sleep(500 * time.Millisecond) // let the proxy settle before reading its RSS; a measurement pause, not a synchronisation
	return float64(rssKiB(pid)-before) / float64(k), nil
}

// auditPeer names the audit-sink results among the peers' results.
const auditPeer = "egressd audit sinks"

// measureAuditCost measures, in one round, egressd's CPU per connection
// at c=32 with its audit log on a file and on /dev/null (the closest to
// off: every line is still built and chained), one after the other.
func measureAuditCost(l *lab, work string, cfg config, r samples) error {
	bin := work + "/egressd"
	for _, sink := range []string{work + "/audit-cost.log", "/dev/null"} {
		addr := freeAddr()
		cmd, err := startEgressd(l, work, bin, addr, sink, []uint16{l.tlsPort})
		if err != nil {
			return err
		}
		err = func() error {
			defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
			if err := waitListening(addr); err != nil {
				return err
			}
			p := egressdPeer()
			if _, _, err := handshake(l, p, addr); err != nil {
				return fmt.Errorf("warm-up: %w", err)
			}
			cpu0 := cpuTime(cmd.Process.Pid)
			if _, _, _, err := handshakes(l, p, addr, cfg.conns, 32); err != nil {
				return err
			}
			name := "file"
			if sink == "/dev/null" {
				name = "discarded"
			}
			r.add(name, float64(cpuTime(cmd.Process.Pid)-cpu0)/1e3/float64(cfg.conns))
			return nil
		}()
		if err != nil {
			return fmt.Errorf("audit to %s: %w", sink, err)
		}
	}
	return nil
}

// egressdPeer addresses egressd by name, for measurements that start it
// themselves.
func egressdPeer() peer {
	return peer{name: "egressd", target: func(port uint16) string { return originHost + ":" + strconv.Itoa(int(port)) }, start: func(string) (*exec.Cmd, error) { return nil, nil }}
}

var helloOnce = sync.OnceValue(func() []byte {
	// A real ClientHello from crypto/tls, captured once.
	a, b := net.Pipe()
	go tls.Client(a, &tls.Config{ServerName: originHost, InsecureSkipVerify: true}).Handshake()
	hdr := make([]byte, 5)
	io.ReadFull(b, hdr)
	body := make([]byte, binary.BigEndian.Uint16(hdr[3:]))
	io.ReadFull(b, body)
	a.Close()
	b.Close()
	return append(hdr, body...)
})

func clientHello() []byte { return helloOnce() }

// helloExchange sends a real ClientHello and reads the raw origin's
// serverHello back, as a TLS client would before sending more.
func helloExchange(c net.Conn) error {
	c.Write(clientHello())
	_, err := io.ReadFull(c, make([]byte, len(serverHello)))
	return err
}

// cpuTime is a process's user+system CPU time from /proc/PID/stat, which
// counts every thread, exited ones included (tinyproxy's connection threads
// exit), in 10 ms ticks: the thousands of connections of the c=32 step keep
// a tick's share of the figure under 2 µs.
func cpuTime(pid int) time.Duration {
	user, sys := cpuTimes(pid)
	return user + sys
}

// cpuTimes is cpuTime split into user and kernel time.
func cpuTimes(pid int) (user, sys time.Duration) {
	if pid == 0 {
		return 0, 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const tick = 10 * time.Millisecond // USER_HZ is 100
	return time.Duration(ut) * tick, time.Duration(st) * tick
}

// bulkBuffer is what the client and origin move per call in the raw
// transfers: large, so that they spend as little CPU as they can and the
// figure is bound by the proxy, which shares this machine's cores with them.
const bulkBuffer = 256 << 10

// send writes n zero bytes to w.
func send(w io.Writer, n int64) error {
	buf := make([]byte, bulkBuffer)
	for n > 0 {
		m, err := w.Write(buf[:min(int64(len(buf)), n)])
		if err != nil {
			return err
		}
		n -= int64(m)
	}
	return nil
}

// sink reads and drops n bytes from r.
func sink(r io.Reader, n int64) error {
	buf := make([]byte, bulkBuffer)
	for n > 0 {
		m, err := r.Read(buf[:min(int64(len(buf)), n)])
		n -= int64(m)
		if err != nil && n > 0 {
			return err
		}
	}
	return nil
}

func rssKiB(pid int) int64 {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			n, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return n
		}
	}
	return 0
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}
