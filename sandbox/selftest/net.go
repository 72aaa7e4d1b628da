package selftest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// MarkerAddr is what the outer's DNS beacon answers for every name: an
// address a sandboxed program may only ever see if a query went upstream
// and its answer came back.
const MarkerAddr = "203.0.113.77"

func networkProbes() []probe {
	return []probe{
		netProbe("tcp-ip-literal-443", func(ctx context.Context, c *Config) (string, string, []string) {
			return dialAll(ctx, "tcp", c.Targets.TCP443)
		}),
		netProbe("tcp-ip-literal-other-port", func(ctx context.Context, c *Config) (string, string, []string) {
			return dialAll(ctx, "tcp", c.Targets.TCPOther)
		}),
		netProbe("ipv6", func(ctx context.Context, c *Config) (string, string, []string) {
			return dialAll(ctx, "tcp6", c.Targets.IPv6)
		}),
		netProbe("udp", func(ctx context.Context, c *Config) (string, string, []string) {
			return sendAll(ctx, c.Targets.UDP, []byte("egressd-selftest"))
		}),
		netProbe("udp-bound-to-lo", func(ctx context.Context, c *Config) (string, string, []string) {
			return sendBoundToLo(c.Targets.UDP, []byte("egressd-selftest"))
		}),
		netProbe("metadata-address", func(ctx context.Context, c *Config) (string, string, []string) {
			return dialAll(ctx, "tcp", c.Targets.Metadata)
		}),
		netProbe("raw-dns-host-resolver", func(ctx context.Context, c *Config) (string, string, []string) {
			return queryAll(ctx, c.HostDNS, c.Nonce)
		}),
		netProbe("raw-dns-public-resolver", func(ctx context.Context, c *Config) (string, string, []string) {
			return queryAll(ctx, c.Targets.PublicDNS, c.Nonce)
		}),
		{"dns-denied-name", LayerDNS, probeDeniedName},
		{"dns-random-subdomains", LayerDNS, probeRandomSubdomains},
		{"ip-literal-through-proxy", LayerCapture, probeIPThroughProxy},
		{"doh-through-proxy", LayerCapture, probeDoHProxy},
		{"doh-direct", LayerCapture, probeDoHDirect},
		{"host-loopback-service", LayerNetNS, func(ctx context.Context, c *Config) (string, string) { return beacon(ctx, "tcp", c.Loopback, c.Nonce) }},
		{"host-unix-socket-path", LayerFS, func(ctx context.Context, c *Config) (string, string) { return beacon(ctx, "unix", c.UnixPath, c.Nonce) }},
		{"host-unix-socket-abstract", LayerNetNS, func(ctx context.Context, c *Config) (string, string) {
			return beacon(ctx, "unix", "@"+c.UnixAbs, c.Nonce)
		}},
		{"hostname", LayerUTS, probeHostname},
	}
}

func netProbe(name string, f func(context.Context, *Config) (string, string, []string)) probe {
	return probe{name, LayerNetNS, netCheck(f)}
}

// dialAll connects to each target. Any connection, and any attempt that
// nothing refused (it timed out, or a router answered), is OPEN: the
// attempt left the sandbox.
func dialAll(ctx context.Context, network string, targets []string) (string, string, []string) {
	if len(targets) == 0 {
		v, d := skipped("no targets")
		return v, d, nil
	}
	var notes, reached []string
	verdict := Closed
	for _, t := range targets {
		d := net.Dialer{Timeout: probeTimeout}
		conn, err := d.DialContext(ctx, network, t)
		switch {
		case err == nil:
			conn.Close()
			verdict = Open
			reached = append(reached, t)
			notes = append(notes, t+": connected")
		case left(err):
			verdict = Open
			notes = append(notes, t+": "+leftNote+" ("+short(err)+")")
		default:
			notes = append(notes, t+": "+short(err))
		}
	}
	return verdict, strings.Join(notes, "; "), reached
}

// leftNote marks an attempt that nothing refused; the audit log cannot
// make it closed.
const leftNote = "nothing in the sandbox refused it"

// left reports whether a failed attempt got past the sandbox: a timeout,
// or an unreachable answer from a router.
func left(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	e := errnoOf(err)
	return e == unix.ETIMEDOUT || e == unix.EHOSTUNREACH
}

// sendAll sends one datagram to each target. A datagram the kernel
// accepted to send has left the sandbox.
func sendAll(ctx context.Context, targets []string, payload []byte) (string, string, []string) {
	return sendEach(targets, "datagram sent", func(t string) error {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "udp", t)
		if err == nil {
			_, err = conn.Write(payload)
			conn.Close()
		}
		return err
	})
}

// sendEach sends to each target with send: one the kernel accepted has
// left the sandbox (OPEN, unless the audit log shows egressd took it).
func sendEach(targets []string, sentNote string, send func(target string) error) (string, string, []string) {
	if len(targets) == 0 {
		v, d := skipped("no targets")
		return v, d, nil
	}
	var notes, reached []string
	verdict := Closed
	for _, t := range targets {
		if err := send(t); err != nil {
			notes = append(notes, t+": "+short(err))
			continue
		}
		verdict = Open
		reached = append(reached, t)
		notes = append(notes, t+": "+sentNote)
	}
	return verdict, strings.Join(notes, "; "), reached
}

// queryAll sends a raw DNS query to each resolver, around the sandbox DNS.
func queryAll(ctx context.Context, servers []string, nonce string) (string, string, []string) {
	if len(servers) == 0 {
		v, d := skipped("no resolvers to try")
		return v, d, nil
	}
	var notes, reached []string
	verdict := Closed
	for _, s := range servers {
		m := new(dns.Msg)
		m.SetQuestion(nonce+".raw.egressd-selftest.example.", dns.TypeA)
		wire, _ := m.Pack()
		var d net.Dialer
		conn, err := d.DialContext(ctx, "udp", s)
		if err == nil {
			_, err = conn.Write(wire)
		}
		if err != nil {
			notes = append(notes, s+": "+short(err))
			if conn != nil {
				conn.Close()
			}
			continue
		}
		verdict = Open
		reached = append(reached, s)
		conn.SetReadDeadline(time.Now().Add(probeTimeout))
		buf := make([]byte, 512)
		if _, err := conn.Read(buf); err == nil {
			notes = append(notes, s+": the resolver answered")
		} else {
			notes = append(notes, s+": the query was sent ("+short(err)+")")
		}
		conn.Close()
	}
	return verdict, strings.Join(notes, "; "), reached
}

// lookup resolves through the program's own resolver configuration, as
// any program would. It returns the addresses, or the error.
func lookup(ctx context.Context, c *Config, name string) ([]string, error) {
	r := &net.Resolver{PreferGo: true}
	if c.Resolver != "" {
		r.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, c.Resolver)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return r.LookupHost(ctx, name)
}

// probeDeniedName asks for a name no manifest allows. The outer's DNS
// beacon answers every name with MarkerAddr and records it; seeing the
// marker here, or the name there, means the query went upstream.
func probeDeniedName(ctx context.Context, c *Config) (string, string) {
	return resolveNames(ctx, c, []string{c.Nonce + "." + first(c.Targets.DeniedNames)})
}

func probeRandomSubdomains(ctx context.Context, c *Config) (string, string) {
	var names []string
	for range 3 {
		names = append(names, fmt.Sprintf("x%08x.%s.%s", rand.Uint32(), c.Nonce, first(c.Targets.DeniedNames)))
	}
	return resolveNames(ctx, c, names)
}

func resolveNames(ctx context.Context, c *Config, names []string) (string, string) {
	var notes []string
	for _, n := range names {
		addrs, err := lookup(ctx, c, n)
		for _, a := range addrs {
			if a == MarkerAddr {
				return opened("%s resolved to the upstream's answer %s: the query left the sandbox", n, a)
			}
		}
		if err != nil {
			notes = append(notes, short(err))
		} else {
			notes = append(notes, n+" -> "+strings.Join(addrs, ","))
		}
	}
	return closed("no upstream answer reached the program (%s)", strings.Join(dedupe(notes), "; "))
}

// probeDoHProxy asks the explicit proxy for a DNS-over-HTTPS server: a
// tunnel there is a resolver the policy cannot see into.
func probeDoHProxy(ctx context.Context, c *Config) (string, string) {
	if os.Getenv("HTTPS_PROXY") == "" {
		return skipped("no HTTPS_PROXY in the environment")
	}
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: probeTimeout}
	var notes []string
	for _, n := range c.Targets.DoHNames {
		req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+n+"/dns-query?dns=AAABAAABAAAAAAAAB2V4YW1wbGUDY29tAAABAAE", nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			return opened("%s answered HTTP %d through the proxy", n, resp.StatusCode)
		}
		notes = append(notes, n+": "+short(err))
	}
	return closed("%s", strings.Join(notes, "; "))
}

// probeIPThroughProxy asks the explicit proxy for a tunnel to each IP
// literal: an address no manifest can name.
func probeIPThroughProxy(ctx context.Context, c *Config) (string, string) {
	proxy, err := url.Parse(os.Getenv("HTTPS_PROXY"))
	if err != nil || proxy.Host == "" {
		return skipped("no HTTPS_PROXY in the environment")
	}
	var notes []string
	for _, t := range c.Targets.TCP443 {
		d := net.Dialer{Timeout: probeTimeout}
		conn, err := d.DialContext(ctx, "tcp", proxy.Host)
		if err != nil {
			notes = append(notes, "proxy: "+short(err))
			continue
		}
		conn.SetDeadline(time.Now().Add(probeTimeout))
		fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", t, t)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		if err != nil {
			notes = append(notes, t+": "+short(err))
			continue
		}
		resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			return opened("the proxy opened a tunnel to %s (%s)", t, resp.Status)
		}
		notes = append(notes, t+": "+resp.Status)
	}
	return closed("%s", strings.Join(notes, "; "))
}

// probeDoHDirect resolves a DoH server's name and opens TLS to it directly,
// as a program that ignores the proxy variables would.
func probeDoHDirect(ctx context.Context, c *Config) (string, string) {
	var notes []string
	for _, n := range c.Targets.DoHNames {
		addrs, err := lookup(ctx, c, n)
		if err != nil || len(addrs) == 0 {
			notes = append(notes, n+": "+short(err))
			continue
		}
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: probeTimeout}, Config: &tls.Config{ServerName: n, InsecureSkipVerify: true}}
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(addrs[0], "443"))
		if err == nil {
			conn.Close()
			return opened("TLS with %s at %s completed", n, addrs[0])
		}
		if left(err) {
			return opened("%s at %s: nothing in the sandbox refused it (%s)", n, addrs[0], short(err))
		}
		notes = append(notes, n+" at "+addrs[0]+": "+short(err))
	}
	return closed("%s", strings.Join(notes, "; "))
}

// beacon connects to one of the outer's listeners, which greets every
// connection with the run's nonce: the greeting proves the host was reached.
func beacon(ctx context.Context, network, addr, nonce string) (string, string) {
	if addr == "" || addr == "@" {
		return skipped("no beacon given")
	}
	d := net.Dialer{Timeout: probeTimeout}
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		if left(err) {
			return opened("%s: nothing refused it (%s)", addr, short(err))
		}
		return closed("%s: %s", addr, short(err))
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(probeTimeout))
	line, _ := bufio.NewReader(conn).ReadString('\n')
	if strings.Contains(line, nonce) {
		return opened("%s answered as the host's listener", addr)
	}
	return closed("%s reached something inside the sandbox, not the host's listener", addr)
}

func probeHostname(_ context.Context, c *Config) (string, string) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return skipped("uname: %v", err)
	}
	name := unix.ByteSliceToString(u.Nodename[:])
	if c.HostName == "" {
		return skipped("the host's name is unknown")
	}
	if name == c.HostName {
		return opened("uname shows the host's name %q", name)
	}
	return closed("uname shows %q", name)
}

// short is an error without Go's wrapping of addresses already said.
func short(err error) string {
	if err == nil {
		return "no error"
	}
	if e := errnoOf(err); e != 0 {
		return e.Error()
	}
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

func first(s []string) string {
	if len(s) == 0 {
		return "denied.egressd-selftest.example"
	}
	return s[0]
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
