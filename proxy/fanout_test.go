package proxy

import (
	"io"
	"net"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// fanOutAnswer answers name's A question with n records, TTL 0, the first
// `usable` of them origin and the rest in 192.0.2.0/24 (refused as
// special-use), truncated over UDP so the client asks again over TCP, as
// a hostile zone does to fit thousands of records in one answer.
func (e *env) fanOutAnswer(name string, n, usable int) {
	e.dns.SetHandler(func(w dns.ResponseWriter, r *dns.Msg) bool {
		q := r.Question[0]
		if !strings.EqualFold(q.Name, dns.Fqdn(name)) {
			return false
		}
		m := new(dns.Msg)
		m.SetReply(r)
		m.Compress = true
		if q.Qtype == dns.TypeA {
			for i := range n {
				ip := e.origin.Addr.Addr().AsSlice()
				if i >= usable {
					ip = net.IPv4(192, 0, 2, byte(1+i%250))
				}
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: ip})
			}
		}
		if _, udp := w.RemoteAddr().(*net.UDPAddr); udp && m.Len() > ednsSize {
			m.Answer, m.Truncated = nil, true
		}
		w.WriteMsg(m)
		return true
	})
}

// TestAnswerWithThousandsOfRecordsIsCheckedOnlyAsFarAsItIsUsed: a hostile
// zone answered one allowed name with 4,000 A records, TTL 0, over TCP,
// and every CONNECT checked every address, each with a kernel route
// lookup: about 0.2 s of CPU per CONNECT, and a neighbour's median latency
// went from 15 ms to 0.5 s. egressd now takes the first 16 A and 16 AAAA
// records of an answer, in the answer's order, checks those and dials only
// those. Here records 17 to 3,000 are in 192.0.2.0/24, which egressd
// refuses: on main the CONNECT is refused private_address after checking
// them; now it is allowed, and the resolver hands over 16 addresses.
func TestAnswerWithThousandsOfRecordsIsCheckedOnlyAsFarAsItIsUsed(t *testing.T) {
	const records = 3000
	e := newEnv(t)
	e.fanOutAnswer("api.allowed.example", records, maxAddrsPerFamily)

	ans, err := e.srv.opts.Resolver.ResolveFor(t.Context(), "fanout", mustName(t, "api.allowed.example"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ans.Addrs) != maxAddrsPerFamily {
		t.Fatalf("an answer of %d A records gave %d addresses, want the first %d", records, len(ans.Addrs), maxAddrsPerFamily)
	}

	c := e.client()
	defer c.CloseIdleConnections()
	resp, err := c.Get(e.originURL("api.allowed.example", "/"))
	if err != nil {
		t.Fatalf("GET through a name with %d records, the first %d usable: %v (every record was checked)", records, maxAddrsPerFamily, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(body), "hello from api.allowed.example") {
		t.Fatalf("body %q", body)
	}
	e.log.waitEvent(t, map[string]any{"event": "connect", "decision": "allow", "host": "api.allowed.example", "addr": e.origin.Addr.String()})
}
