package proxy

import (
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/miekg/dns"
)

// rebindingDNS answers A questions for name with the next address of seq
// (TTL 0, so nothing is cached), and AAAA with nothing.
func rebindingDNS(e *env, name string, seq ...string) {
	var mu sync.Mutex
	next := 0
	e.dns.SetHandler(func(w dns.ResponseWriter, r *dns.Msg) bool {
		q := r.Question[0] // miekg/dns's DefaultMsgAcceptFunc guarantees exactly one question
		if q.Name != dns.Fqdn(name) {
			return false
		}
		m := new(dns.Msg)
		m.SetReply(r)
		if q.Qtype == dns.TypeA {
			mu.Lock()
			a := seq[next%len(seq)]
			next++
			mu.Unlock()
			rr, _ := dns.NewRR(q.Name + " 0 IN A " + a)
			m.Answer = append(m.Answer, rr)
		}
		w.WriteMsg(m)
		return true
	})
}

// TestRebindingNameProbingTheMetadataAddressIsNamedInTheLog is issue 18's
// break 1, end to end: an allowed name answers (TTL 0) 10.0.0.1, then
// 169.254.169.254, then 127.0.0.1, then 10.7.7.7, one CONNECT each within
// one folding window. Every refusal is a 403 private_address; the log held
// one line for 10.0.0.1 and a count of 3 under the name, and the metadata
// attempt was nowhere. Each address now has a line of its own.
func TestRebindingNameProbingTheMetadataAddressIsNamedInTheLog(t *testing.T) {
	e := newEnv(t, withFoldWindow(time.Hour))
	seq := []string{"10.0.0.1", "169.254.169.254", "127.0.0.1", "10.7.7.7"}
	rebindingDNS(e, "seq.cdn.allowed.example", seq...)
	for range seq {
		resp, err := e.sendConnect("seq.cdn.allowed.example:443")
		if err != nil || resp.StatusCode != 403 || resp.Header.Get(ReasonHeader) != "private_address" {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
	}
	for _, a := range seq {
		e.log.waitEvent(t, map[string]any{"event": "connect", "reason": "private_address", "host": "seq.cdn.allowed.example", "addr": a})
	}
}

// TestMetadataAddressInSIITFormIsNamedBehindDecoys is break 2, end to end:
// behind 13 same-second decoys, a name resolving to ::ffff:0:a9fe:a9fe (SIIT,
// denied as 169.254.169.254), and the CONNECT literal
// [::ffff:0:a9fe:a9fe]:443, were only counted as unlisted.
func TestMetadataAddressInSIITFormIsNamedBehindDecoys(t *testing.T) {
	e := newEnv(t, withFoldWindow(time.Hour))
	for i := range 13 {
		e.dns.Add(t, "d"+strconv.Itoa(i)+".cdn.allowed.example. 60 IN A 192.0.2."+strconv.Itoa(i+1))
	}
	e.dns.Add(t, "siit.cdn.allowed.example. 60 IN AAAA ::ffff:0:a9fe:a9fe")
	for i := range 13 {
		if resp, err := e.sendConnect("d" + strconv.Itoa(i) + ".cdn.allowed.example:443"); err != nil || resp.StatusCode != 403 {
			t.Fatalf("decoy %d: %v %v", i, resp, err)
		}
	}
	if resp, err := e.sendConnect("siit.cdn.allowed.example:443"); err != nil || resp.Header.Get(ReasonHeader) != "private_address" {
		t.Fatalf("siit: %v %v", resp, err)
	}
	e.log.waitEvent(t, map[string]any{"event": "connect", "host": "siit.cdn.allowed.example", "addr": "::ffff:0:a9fe:a9fe"})

	for i := range 13 {
		decoy := "10.0.0." + strconv.Itoa(i+1) + ":443"
		if i == 4 {
			decoy = "192.0.2.1:443"
		}
		if resp, err := e.sendConnect(decoy); err != nil || resp.StatusCode != 403 {
			t.Fatalf("decoy %s: %v %v", decoy, resp, err)
		}
	}
	if resp, err := e.sendConnect("[::ffff:0:a9fe:a9fe]:443"); err != nil || resp.Header.Get(ReasonHeader) != "ip_literal" {
		t.Fatalf("literal: %v %v", resp, err)
	}
	e.log.waitEvent(t, map[string]any{"event": "connect", "reason": "ip_literal", "host_raw": "[::ffff:0:a9fe:a9fe]:443"})
}

// TestPortScanOfOneNameKeepsEveryPortInTheLog is break 3, end to end:
// db.cdn.allowed.example on 22, 6379, 5432 and 2375 kept only port 22.
func TestPortScanOfOneNameKeepsEveryPortInTheLog(t *testing.T) {
	e := newEnv(t, withFoldWindow(time.Hour))
	ports := []string{"22", "6379", "5432", "2375"}
	for _, p := range ports {
		if resp, err := e.sendConnect("db.cdn.allowed.example:" + p); err != nil || resp.Header.Get(ReasonHeader) != "port_not_allowed" {
			t.Fatalf("port %s: %v %v", p, resp, err)
		}
	}
	for _, p := range ports {
		n, _ := strconv.Atoi(p)
		e.log.waitEvent(t, map[string]any{"event": "connect", "reason": "port_not_allowed", "port": n})
	}
}

// TestDomainFrontingTargetBehindSNIDecoysIsNamedInTheLogAndCounted is
// issue 18's break 1 (f18b), end to end: 41 CONNECTs to the allowed
// api.allowed.example in one folding window, 40 of them fronting (SNI) for
// decoyN.evil.example and one for admin.victim-bank.example. The victim's
// name was nowhere in the log ("suppressed 37, unlisted 29") and the report
// counted 12 attempts. It has a line of its own now, and the report counts
// all 41.
func TestDomainFrontingTargetBehindSNIDecoysIsNamedInTheLogAndCounted(t *testing.T) {
	e := newEnv(t, withFoldWindow(time.Hour))
	e.resolveToOrigin("api.allowed.example")
	target := "api.allowed.example:" + itoa(e.origin.Addr.Port())
	for i := range 41 {
		sni := "decoy" + strconv.Itoa(i) + ".evil.example"
		if i == 20 {
			sni = "admin.victim-bank.example"
		}
		if status, closed := e.rawTunnel(target, buildHello(helloSpec{names: []string{sni}})); status != 200 || !closed {
			t.Fatalf("%s: status %d, closed %v", sni, status, closed)
		}
	}
	e.log.waitEvent(t, map[string]any{"event": "connect", "reason": "sni_mismatch", "sni": "admin.victim-bank.example"})
	// The client sees its tunnel close before the refusal is written: wait
	// for the writes, flushing the folded ones, until the report has all 41
	// or the log stops growing.
	deadline := time.After(10 * time.Second)
	for {
		e.srv.opts.Suppress.Flush(true)
		tried := triedAtEntry(t, e, "api.allowed.example")
		if tried == 41 {
			return
		}
		select {
		case <-e.log.wrote:
		case <-deadline:
			t.Fatalf("the report counts %d attempts at api.allowed.example, want 41\n%s", tried, e.log.String())
		}
	}
}

// triedAtEntry is the attempts the report of e's log counts at entry, an
// entry of the manifest that never connected.
func triedAtEntry(t *testing.T, e *env, entry string) int64 {
	var recs []audit.Record
	for _, l := range e.log.events(t) {
		b, _ := json.Marshal(l)
		var r audit.Record
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	rep := audit.BuildReport(recs, map[string][]string{"com.test.weather": {entry}})
	for _, tr := range rep.Integrations[0].TriedNeverConnected {
		if tr.Entry == entry {
			return tr.Attempts
		}
	}
	return 0
}
