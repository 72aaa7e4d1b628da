// Package proxytest provides real peers for egressd's tests: a certificate
// authority, TLS origins and a DNS server, all on loopback and random
// ports, in the spirit of net/http/httptest.
package proxytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// TB is the part of testing.TB the peers use, so tools outside tests (the
// bench harness) can run them too.
type TB interface {
	Fatal(args ...any)
	Cleanup(func())
}

// CA issues certificates for the loopback origins.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	Pool *x509.CertPool
}

func NewCA(t TB) *CA {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "egressd test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, key: key, Pool: pool}
}

func (ca *CA) Leaf(t TB, names ...string) tls.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		DNSNames: names, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// origin is a real TLS server on a loopback address. It answers HTTP with
// "hello from NAME" and, on /echo, echoes the body.
type Origin struct {
	ln   net.Listener
	Addr netip.AddrPort
}

func StartOrigin(t TB, ca *CA, ip string, names ...string) *Origin {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		ErrorLog:  log.New(io.Discard, "", 0),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{ca.Leaf(t, names...)}},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/echo" {
				io.Copy(w, r.Body)
				return
			}
			io.WriteString(w, "hello from "+r.Host)
		}),
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return &Origin{ln: ln, Addr: netip.MustParseAddrPort(ln.Addr().String())}
}

// dnsServer is a real miekg/dns server on loopback that answers from a
// table and counts every question it is asked.
type DNS struct {
	Addr    string
	mu      sync.Mutex
	records map[string][]dns.RR // by lower-case fqdn and type name "A"/"AAAA"
	asked   map[string]int
	handler func(w dns.ResponseWriter, r *dns.Msg) bool // optional override; true if handled
}

func StartDNS(t TB) *DNS {
	d := &DNS{records: map[string][]dns.RR{}, asked: map[string]int{}}
	// UDP and TCP on one random port; retry if the TCP side is taken (an
	// outgoing connection may hold that ephemeral port).
	var pc net.PacketConn
	var ln net.Listener
	for attempt := 0; ; attempt++ {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		if attempt == 20 {
			t.Fatal(err)
		}
	}
	d.Addr = pc.LocalAddr().String()
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: d}, {Listener: ln, Handler: d}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go srv.ActivateAndServe()
		<-started
		t.Cleanup(func() { srv.Shutdown() })
	}
	return d
}

// add records an answer; rr is in zone-file syntax, e.g. "a.example. 60 IN A 127.0.0.2".
func (d *DNS) Add(t TB, rrs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range rrs {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		key := strings.ToLower(rr.Header().Name)
		d.records[key] = append(d.records[key], rr)
	}
}

// setHandler installs an override consulted before the table.
func (d *DNS) SetHandler(h func(w dns.ResponseWriter, r *dns.Msg) bool) {
	d.mu.Lock()
	d.handler = h
	d.mu.Unlock()
}

func (d *DNS) Questions(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked[strings.ToLower(dns.Fqdn(name))]
}

func (d *DNS) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	d.mu.Lock()
	q := r.Question[0] // miekg/dns's DefaultMsgAcceptFunc guarantees exactly one question
	d.asked[strings.ToLower(q.Name)]++
	h := d.handler
	d.mu.Unlock()
	if h != nil && h(w, r) {
		return
	}
	m := new(dns.Msg)
	m.SetReply(r)
	d.mu.Lock()
	for _, rr := range d.records[strings.ToLower(q.Name)] {
		if rr.Header().Rrtype == q.Qtype || rr.Header().Rrtype == dns.TypeCNAME {
			m.Answer = append(m.Answer, rr)
			if cn, ok := rr.(*dns.CNAME); ok {
				for _, rr2 := range d.records[strings.ToLower(cn.Target)] {
					if rr2.Header().Rrtype == q.Qtype {
						m.Answer = append(m.Answer, rr2)
					}
				}
			}
		}
	}
	d.mu.Unlock()
	w.WriteMsg(m)
}

// PEM returns the CA certificate in PEM form, for curl's --cacert.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}
