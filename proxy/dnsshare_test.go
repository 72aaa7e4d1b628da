package proxy

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/proxy/proxytest"
	"github.com/miekg/dns"
)

// TestOneIntegrationsRandomNameFloodDoesNotEvictAnothersDNSEntries: the
// answer cache was one LRU for every integration, so integration A
// resolving random names under its own wildcard evicted B's entries, and
// every B connection went back upstream (to a resolver A's author may be
// slowing down). Each integration now has its own bounded share. A real
// DNS server on loopback answers every name; the test counts the
// questions it is asked for B's name.
func TestOneIntegrationsRandomNameFloodDoesNotEvictAnothersDNSEntries(t *testing.T) {
	srv := proxytest.StartDNS(t)
	srv.SetHandler(func(w dns.ResponseWriter, r *dns.Msg) bool {
		m := new(dns.Msg)
		m.SetReply(r)
		if q := r.Question[0]; q.Qtype == dns.TypeA {
			rr, _ := dns.NewRR(q.Name + " 300 IN A 192.0.2.1")
			m.Answer = append(m.Answer, rr)
		}
		w.WriteMsg(m)
		return true
	})
	res := NewResolver([]string{srv.Addr}, 5*time.Second)
	ctx := context.Background()
	b := mustName(t, "api.b.example")
	if _, err := res.ResolveFor(ctx, "B", b); err != nil {
		t.Fatal(err)
	}
	const flood = 4096 + 100 // past the single cache egressd had
	for i := range flood {
		n := mustName(t, "r"+strconv.Itoa(i)+".cdn.a.example")
		if _, err := res.ResolveFor(ctx, "A", n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := res.ResolveFor(ctx, "B", b); err != nil {
		t.Fatal(err)
	}
	if q := srv.Questions("api.b.example"); q != 2 { // A and AAAA, once
		t.Fatalf("B's name was asked upstream %d times: A's flood evicted it", q)
	}
	if n := res.share("A").Len(); n > cacheEntries {
		t.Fatalf("A's share holds %d entries, over its bound %d", n, cacheEntries)
	}
}

func mustName(t *testing.T, s string) allowlist.Name {
	t.Helper()
	n, err := allowlist.ParseWireHost(strings.ToLower(s), allowlist.HostForm)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
