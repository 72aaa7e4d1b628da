package proxy

import (
	"errors"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
	"github.com/miekg/dns"
)

// SandboxDNS is the resolver a sandboxed integration sees at 127.0.0.53.
// It never forwards a query anywhere. Allowed names get an A record with a
// synthetic loopback address (which the capture listener maps back to the
// name); every other query type for them gets NODATA, so nothing bypasses
// the proxy over IPv6 or HTTPS records. Other names get NXDOMAIN and an
// audit line. In audit mode every valid name gets an address, so the
// capture path can log would_deny.
type SandboxDNS struct {
	Server    *Server // the sandbox's proxy: its policy, audit log and folding
	Synthetic *Synthetic
	// TTL of the synthetic answers, in seconds.
	TTL uint32
}

// ServeDNS answers one query. Every message reaches it (see UDPServer);
// what is not one class-IN QUERY of one question is refused and audited.
func (d *SandboxDNS) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	if msg, rcode := queryProblem(r); msg != "" {
		d.refuseQuery(r, msg)
		if rcode >= 0 { // a response gets none
			w.WriteMsg(new(dns.Msg).SetRcode(r, rcode))
		}
		return
	}
	m := new(dns.Msg)
	m.SetReply(r)
	m.RecursionAvailable = true
	defer w.WriteMsg(m)
	q := r.Question[0]
	s := d.Server
	p := s.opts.Registry.Policy(s.opts.Key)
	ev := s.baseEvent(p)
	ev.Kind, ev.HostRaw = audit.DNS, q.Name
	name, err := allowlist.ParseWireHost(q.Name, allowlist.HostForm)
	if err != nil {
		ev.Decision, ev.Reason = "deny", string(policy.BadRequest)
		if errors.Is(err, allowlist.ErrIPLiteral) {
			ev.Reason = string(policy.IPLiteral)
		}
		m.Rcode = dns.RcodeNameError
		s.recordDenial(ev)
		return
	}
	ev.Host = name.String()
	// A flood of random names under a wildcard would grow the synthetic
	// table and the audit log: queries share the integration's token bucket
	// with its connections.
	if !s.limiter.rate.Allow() {
		ev.Decision, ev.Reason = "deny", string(policy.LimitExceeded)
		m.Rcode = dns.RcodeRefused
		ev.Host = ""
		s.recordDenial(ev)
		return
	}
	if p == nil {
		m.Rcode = dns.RcodeNameError
		return
	}
	dec := p.Decide(name.String(), policy.DefaultPort)
	if !dec.Verdict.Permits() {
		ev.Decision, ev.Reason, ev.Rule = "deny", string(dec.Reason), dec.Rule
		m.Rcode = dns.RcodeNameError
		s.recordDenial(ev)
		return
	}
	if dec.Verdict == policy.WouldDeny {
		ev.Decision, ev.Reason, ev.Exemption = dec.Verdict.String(), string(dec.Reason), dec.Exemption
		s.recordDenial(ev)
	}
	if q.Qtype != dns.TypeA {
		return // NODATA: the name exists, with nothing of this type
	}
	addr, ok := d.Synthetic.Assign(name)
	if !ok {
		ev.Decision, ev.Reason, ev.Msg = "deny", string(policy.LimitExceeded), "synthetic address table exhausted"
		m.Rcode = dns.RcodeServerFailure
		s.recordDenial(ev)
		return
	}
	m.Answer = append(m.Answer, &dns.A{
		Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: d.TTL},
		A:   addr.AsSlice(),
	})
}
