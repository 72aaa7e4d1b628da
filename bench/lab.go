package main

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/egressd/egressd/proxy/proxytest"
	"github.com/miekg/dns"
)

// originHost is the one host every proxy allows. The ".test" TLD never
// leaves this machine.
const originHost = "bench.egressd.test"

// lab holds what every peer is measured against: the same origins, the same
// DNS answer, the same client.
type lab struct {
	ca       *proxytest.CA
	tlsPort  uint16 // TLS 1.3 echo origin
	sinkPort uint16 // raw: reads a ClientHello record, then N bytes, then acks
	srcPort  uint16 // raw: reads a ClientHello record, then sends N bytes
	dnsAddr  string
	hosts    string // a hosts file naming the origin, for squid
	closers  []func()
}

// testingTB lets the test peers run outside a test: a failure panics.
type testingTB struct{}

func (testingTB) Fatal(args ...any) { panic(fmt.Sprint(args...)) }
func (testingTB) Cleanup(func())    {}

func newLab(work string) (*lab, error) {
	l := &lab{}
	l.ca = proxytest.NewCA(testingTB{})
	cert := l.ca.Leaf(testingTB{}, originHost)
	tlsLn, err := tls.Listen("tcp", "127.0.0.2:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
	if err != nil {
		return nil, err
	}
	l.closers = append(l.closers, func() { tlsLn.Close() })
	l.tlsPort = port(tlsLn.Addr())
	go serve(tlsLn, func(c net.Conn) { io.Copy(c, c) })
	for _, p := range []*uint16{&l.sinkPort, &l.srcPort} {
		ln, err := net.Listen("tcp", "127.0.0.2:0")
		if err != nil {
			return nil, err
		}
		l.closers = append(l.closers, func() { ln.Close() })
		*p = port(ln.Addr())
		source := p == &l.srcPort
		go serve(ln, func(c net.Conn) { rawOrigin(c, source) })
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if q := r.Question[0]; q.Qtype == dns.TypeA && q.Name == originHost+"." {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.ParseIP("127.0.0.2")})
		}
		w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	l.closers = append(l.closers, func() { srv.Shutdown() })
	l.dnsAddr = pc.LocalAddr().String()
	l.hosts = filepath.Join(work, "hosts")
	if err := os.WriteFile(l.hosts, []byte("127.0.0.2 "+originHost+"\n"), 0o644); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *lab) close() {
	for _, c := range l.closers {
		c()
	}
}

func serve(ln net.Listener, handle func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() { defer c.Close(); handle(c) }()
	}
}

// serverHello is the raw origins' answer to a ClientHello: a handshake
// record holding a ServerHello that is not a HelloRetryRequest.
var serverHello = []byte{22, 3, 3, 0, 4, 2, 0, 0, 0}

// rawOrigin drops the ClientHello record egressd requires, answers it with
// serverHello, reads the byte count the client asks for, then sinks that many bytes and acks one byte,
// or sends that many.
func rawOrigin(c net.Conn, source bool) {
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(c, hdr); err != nil {
		return
	}
	io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint16(hdr[3:])))
	// Answer the hello as a TLS server would, before the client's next
	// bytes: egressd holds those until the server's first record (its
	// HelloRetryRequest check), and a silent origin would stall every
	// transfer for the ClientHello timeout.
	if _, err := c.Write(serverHello); err != nil {
		return
	}
	var n int64
	if err := binary.Read(c, binary.BigEndian, &n); err != nil {
		return
	}
	if n == 0 { // an idle tunnel: hold it until the client closes
		io.Copy(io.Discard, c)
		return
	}
	if source {
		send(c, n)
		return
	}
	if sink(c, n) == nil {
		c.Write([]byte{1})
	}
}

func port(a net.Addr) uint16 { return uint16(a.(*net.TCPAddr).Port) }

func addr(p uint16) string { return "127.0.0.2:" + strconv.Itoa(int(p)) }
