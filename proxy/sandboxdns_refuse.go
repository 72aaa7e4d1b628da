package proxy

import (
	"net"
	"strconv"
	"strings"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
	"github.com/miekg/dns"
)

// The sandbox resolver answers one shape of message: a QUERY of one class
// IN question, carrying no records but an EDNS one. Everything else is
// refused, and audited with the names it carried, since a program that
// spells a secret into a name has sent it to whoever reads the log, and
// the log is where a reviewer looks. miekg/dns's default MsgAcceptFunc
// answered other opcodes and question counts itself, before any handler
// and without a hook, so every message is accepted here and judged in
// ServeDNS; bytes that are no DNS message reach malformed.

// UDPServer returns the server for the sandbox's DNS-over-UDP socket.
func (d *SandboxDNS) UDPServer(pc net.PacketConn) *dns.Server {
	return &dns.Server{PacketConn: pc, Handler: d, MsgAcceptFunc: acceptEveryMessage, MsgInvalidFunc: d.malformed}
}

// acceptEveryMessage hands every message to ServeDNS, which refuses and
// audits what it does not answer.
func acceptEveryMessage(dns.Header) dns.MsgAcceptAction { return dns.MsgAccept }

// malformed audits bytes that do not parse as a DNS message; miekg/dns
// answers them FORMERR (or nothing, when even the header is cut short).
// The message is one sentence, so a flood of them folds.
func (d *SandboxDNS) malformed([]byte, error) {
	d.refuseQuery(nil, "malformed DNS message refused")
}

// queryProblem says why r is not a query the resolver answers, and the
// rcode of the answer; "" when it is one.
func queryProblem(r *dns.Msg) (msg string, rcode int) {
	switch {
	case r.Response:
		return "DNS response sent to the resolver refused: only queries are answered", -1
	case r.Opcode != dns.OpcodeQuery:
		op, ok := dns.OpcodeToString[r.Opcode]
		if !ok {
			op = strconv.Itoa(r.Opcode)
		}
		return "DNS message with opcode " + op + " refused: only QUERY is answered", dns.RcodeNotImplemented
	case len(r.Question) != 1:
		return "DNS query with " + strconv.Itoa(len(r.Question)) + " questions refused: one question per query", dns.RcodeFormatError
	case r.Question[0].Qclass != dns.ClassINET:
		return "DNS query of class " + className(r.Question[0].Qclass) + " refused: only class IN is answered", dns.RcodeRefused
	case len(r.Answer) > 0 || len(r.Ns) > 0 || len(r.Extra) > 1 || (len(r.Extra) == 1 && r.IsEdns0() == nil):
		return "DNS query carrying records refused: a query carries one question and at most an EDNS record", dns.RcodeFormatError
	}
	return "", dns.RcodeSuccess
}

// refuseQuery audits r (nil when it did not parse) as refused for msg:
// every name it asked about, as sent, and the host when there is one.
func (d *SandboxDNS) refuseQuery(r *dns.Msg, msg string) {
	s := d.Server
	p := s.opts.Registry.Policy(s.opts.Key)
	ev := s.baseEvent(p)
	ev.Kind, ev.Decision, ev.Reason, ev.Msg = audit.DNS, "deny", string(policy.BadRequest), msg
	if r != nil {
		names := make([]string, len(r.Question))
		for i, q := range r.Question {
			names[i] = q.Name
		}
		ev.HostRaw = strings.Join(names, " ")
		if len(names) == 1 {
			if name, err := allowlist.ParseWireHost(names[0], allowlist.HostForm); err == nil {
				ev.Host = name.String()
			}
		}
	}
	s.recordDenial(ev)
}

// className names a DNS class as a zone file does (miekg/dns's table lacks
// ANY).
func className(c uint16) string {
	if c == dns.ClassANY {
		return "ANY"
	}
	return dns.Class(c).String()
}
