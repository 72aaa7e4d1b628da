package proxy

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestSandboxDNSOddQueriesForUnlistedNamesAreAudited is issue 18's sixth
// review: a query for an unlisted name got an audit line only as one
// class-IN QUERY with one question. Class CH, ANY or NONE, opcode NOTIFY
// (or any but QUERY), two questions or none, records where a query has
// none, a response sent to the resolver, or bytes that are no DNS message
// were refused (REFUSED, FORMERR) or dropped with nothing in the log, so a
// program could spell a secret into names no reviewer would see. Each is
// refused and audited with the names it carried (escaped by the writer)
// and what was wrong, over UDP and TCP.
func TestSandboxDNSOddQueriesForUnlistedNamesAreAudited(t *testing.T) {
	query := func(name string, class uint16) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		m.Question[0].Qclass = class
		return m
	}
	notify := query("notify-secret.d4.example.", dns.ClassINET)
	notify.Opcode = dns.OpcodeNotify
	update := query("update-secret.d5.example.", dns.ClassINET)
	update.Opcode = dns.OpcodeUpdate
	two := query("qd2-secret.d6.example.", dns.ClassINET)
	two.Question = append(two.Question, dns.Question{Name: "api.allowed.example.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	none := query("x.", dns.ClassINET)
	none.Question = nil
	carrying := query("an-secret.d7.example.", dns.ClassINET)
	carrying.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: "an-secret.d7.example.", Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{"c2VjcmV0"}}}
	bell := query("bell\x07.d10.example.", dns.ClassCHAOS)

	for _, c := range []struct {
		q     *dns.Msg
		rcode int
		want  map[string]any
	}{
		{query("ch-secret.d1.example.", dns.ClassCHAOS), dns.RcodeRefused, map[string]any{"host": "ch-secret.d1.example", "msg": "DNS query of class CH refused: only class IN is answered"}},
		{query("any-secret.d2.example.", dns.ClassANY), dns.RcodeRefused, map[string]any{"host": "any-secret.d2.example", "msg": "DNS query of class ANY refused: only class IN is answered"}},
		{query("none-secret.d3.example.", dns.ClassNONE), dns.RcodeRefused, map[string]any{"host": "none-secret.d3.example", "msg": "DNS query of class NONE refused: only class IN is answered"}},
		{query("api.allowed.example.", dns.ClassCHAOS), dns.RcodeRefused, map[string]any{"host": "api.allowed.example", "msg": "DNS query of class CH refused: only class IN is answered"}},
		{notify, dns.RcodeNotImplemented, map[string]any{"host": "notify-secret.d4.example", "msg": "DNS message with opcode NOTIFY refused: only QUERY is answered"}},
		{update, dns.RcodeNotImplemented, map[string]any{"host": "update-secret.d5.example", "msg": "DNS message with opcode UPDATE refused: only QUERY is answered"}},
		{two, dns.RcodeFormatError, map[string]any{"host_raw": "qd2-secret.d6.example. api.allowed.example.", "msg": "DNS query with 2 questions refused: one question per query"}},
		{none, dns.RcodeFormatError, map[string]any{"msg": "DNS query with 0 questions refused: one question per query"}},
		{carrying, dns.RcodeFormatError, map[string]any{"host": "an-secret.d7.example", "msg": "DNS query carrying records refused: a query carries one question and at most an EDNS record"}},
		{bell, dns.RcodeRefused, map[string]any{"host_raw": `bell\\007.d10.example.`}},
	} {
		e := newEnv(t) // its own log: the suppressor would fold refusals past the fourth
		server := startSandboxDNS(t, e, NewSynthetic(100, time.Minute))
		r, _, err := new(dns.Client).Exchange(c.q, server)
		if err != nil {
			t.Fatalf("%v: %v", c.q.Question, err)
		}
		if r.Rcode != c.rcode {
			t.Errorf("%v: rcode %s, want %s", c.q.Question, dns.RcodeToString[r.Rcode], dns.RcodeToString[c.rcode])
		}
		want := map[string]any{"event": "dns", "decision": "deny", "reason": "bad_request"}
		for k, v := range c.want {
			want[k] = v
		}
		e.log.waitEvent(t, want)
	}

	// Over TCP too.
	e := newEnv(t)
	server := startSandboxDNS(t, e, NewSynthetic(100, time.Minute))
	tcp := startSandboxDNSOverTCP(t, e)
	if r, _, err := (&dns.Client{Net: "tcp"}).Exchange(query("tcp-ch-secret.d8.example.", dns.ClassCHAOS), tcp); err != nil || r.Rcode != dns.RcodeRefused {
		t.Fatalf("over TCP: %v %v", r, err)
	}
	e.log.waitEvent(t, map[string]any{"event": "dns", "reason": "bad_request", "host": "tcp-ch-secret.d8.example"})

	// Messages that get no answer are still in the log.
	reply := query("qr-secret.d9.example.", dns.ClassINET)
	reply.Response = true
	packed, err := reply.Pack()
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("udp", server)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(packed)
	e.log.waitEvent(t, map[string]any{"event": "dns", "reason": "bad_request", "host": "qr-secret.d9.example", "msg": "DNS response sent to the resolver refused: only queries are answered"})
	c.Write([]byte("\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x3fsecret")) // a label longer than the message
	e.log.waitEvent(t, map[string]any{"event": "dns", "reason": "bad_request", "msg": "malformed DNS message refused"})
}

// startSandboxDNSOverTCP serves the sandbox resolver for e's integration
// over TCP on a loopback port.
func startSandboxDNSOverTCP(t *testing.T, e *env) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := (&SandboxDNS{Server: e.srv, Synthetic: NewSynthetic(100, time.Minute), TTL: 30}).TCPServer(ln)
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}
