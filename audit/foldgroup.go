package audit

import (
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// foldClass is what a summary line stands for: refusals alike in every
// field a reviewer groups by, except the target. Only fields egressd or the
// operator chose are in it (never the method or anything else the client
// sends), so a client cannot open a new class, and a new line, per request.
// The manifest path is in it because it is all that names a listener whose
// manifest never loaded (no integration, claim or generation yet): without
// it every such listener shared one class, and one integration's refusals
// were summed under another's manifest.
func foldClass(e Event) string {
	return strings.Join([]string{string(e.Kind), e.Integration, e.Claim, strconv.FormatUint(e.Generation, 10), e.Decision, e.Reason, e.Listener, e.Manifest}, "|")
}

// foldTarget is what was asked for: the canonical host (see targetOf), or
// as sent when it is not a host name (an IP literal, a bad request), or the
// peer a unix listener refused.
func foldTarget(e Event) string {
	switch {
	case e.Host != "":
		return targetOf(CapTarget(e.Host), e.Port, eventSNI(e), e.Reason, e.Addr)
	case e.HostRaw != "":
		return quoteRaw(e.HostRaw)
	case e.Addr != "":
		return Cap(e.Addr, maxField)
	}
	return Cap(e.Msg, maxField)
}

// eventSNI is the server_name e's hello sent when it was not the host, as
// the log writes it: the host name, or as sent (escaped) when it was no
// host name, so each distinct fronting target folds apart.
func eventSNI(e Event) string {
	if e.SNI != "" {
		return CapTarget(e.SNI)
	}
	if e.SNIRaw != "" {
		return quoteRaw(e.SNIRaw)
	}
	return ""
}

// targetOf names a refusal of host as folding and the report group it:
//
//   - with the port, when it is not 443, so a port scan of one name keeps
//     every port it tried ("db.evil.example:6379");
//   - with the SNI, when the ClientHello asked for another host, so each
//     host a client fronted for stays apart ("api.example (SNI x.example)");
//   - with the address, when the refusal is of the address the name
//     resolved to, so a name rebinding from address to address (a scan of
//     the private network, the metadata address at TTL 0) keeps each
//     address ("seq.evil.example (address 169.254.169.254)").
func targetOf(host string, port uint16, sni, reason, addr string) string {
	t := host
	if port != 0 && port != 443 {
		t += ":" + strconv.Itoa(int(port))
	}
	if sni != "" {
		return t + " (SNI " + sni + ")"
	}
	if a := refusedAddr(reason, addr); a != "" {
		t += " (address " + a + ")"
	}
	return t
}

// addressReasons are the refusals of an address a name resolved to (or
// reached): for them the address is the finding.
var addressReasons = map[string]bool{"private_address": true, "operator_denied": true}

// refusedAddr is the address a refusal for reason was about, without its
// port, or "" when the refusal was not about an address.
func refusedAddr(reason, addr string) string {
	if !addressReasons[reason] || addr == "" {
		return ""
	}
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return ap.Addr().String()
	}
	return Cap(addr, maxField)
}

// hostOf is the host a target names: the target without its port and
// without what targetOf added after it.
func hostOf(target string) string {
	host, _, _ := strings.Cut(target, " (")
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[:i], ":") {
		host = host[:i]
	}
	return host
}

// addrGroups are address ranges a refusal into which is a finding of its
// own: the first target of each is written as a line in every window,
// whatever else floods. Cloud metadata addresses are each their own group.
var addrGroups = []struct {
	name   string
	prefix netip.Prefix
}{
	{"metadata:169.254.169.254", netip.MustParsePrefix("169.254.169.254/32")},
	{"metadata:169.254.170.2", netip.MustParsePrefix("169.254.170.2/32")},
	{"metadata:169.254.169.253", netip.MustParsePrefix("169.254.169.253/32")},
	{"metadata:100.100.100.200", netip.MustParsePrefix("100.100.100.200/32")},
	{"metadata:192.0.0.192", netip.MustParsePrefix("192.0.0.192/32")},
	{"metadata:fd00:ec2::254", netip.MustParsePrefix("fd00:ec2::254/128")},
	{"metadata:168.63.129.16", netip.MustParsePrefix("168.63.129.16/32")}, // Azure WireServer
	{"this-network", netip.MustParsePrefix("0.0.0.0/8")},
	{"loopback", netip.MustParsePrefix("127.0.0.0/8")},
	{"loopback", netip.MustParsePrefix("::1/128")},
	{"link-local", netip.MustParsePrefix("169.254.0.0/16")},
	{"link-local", netip.MustParsePrefix("fe80::/10")},
	{"private", netip.MustParsePrefix("10.0.0.0/8")},
	{"private", netip.MustParsePrefix("172.16.0.0/12")},
	{"private", netip.MustParsePrefix("192.168.0.0/16")},
	{"private", netip.MustParsePrefix("fc00::/7")},
	{"shared", netip.MustParsePrefix("100.64.0.0/10")},
	{"nat64", netip.MustParsePrefix("64:ff9b::/96")},
	{"nat64", netip.MustParsePrefix("64:ff9b:1::/48")},
	{"multicast", netip.MustParsePrefix("224.0.0.0/4")},
	{"multicast", netip.MustParsePrefix("ff00::/8")},
	{"reserved", netip.MustParsePrefix("240.0.0.0/4")},
	{"unspecified", netip.MustParsePrefix("::/128")},
	{"ietf", netip.MustParsePrefix("192.0.0.0/24")},
	{"ietf", netip.MustParsePrefix("2001::/23")},
	{"documentation", netip.MustParsePrefix("192.0.2.0/24")},
	{"documentation", netip.MustParsePrefix("198.51.100.0/24")},
	{"documentation", netip.MustParsePrefix("203.0.113.0/24")},
	{"documentation", netip.MustParsePrefix("2001:db8::/32")},
	{"documentation", netip.MustParsePrefix("3fff::/20")},
	{"6to4-relay", netip.MustParsePrefix("192.88.99.0/24")},
	{"6to4-relay", netip.MustParsePrefix("2002::/16")},
	{"benchmark", netip.MustParsePrefix("198.18.0.0/15")},
	{"discard", netip.MustParsePrefix("100::/64")},
	{"discard", netip.MustParsePrefix("100:0:0:1::/64")},
	{"site-local", netip.MustParsePrefix("fec0::/10")},
	{"as112", netip.MustParsePrefix("2620:4f:8000::/48")},
	{"as112", netip.MustParsePrefix("192.175.48.0/24")},
	{"as112", netip.MustParsePrefix("192.31.196.0/24")},
	{"amt", netip.MustParsePrefix("192.52.193.0/24")},
	{"srv6", netip.MustParsePrefix("5f00::/16")},
}

// globalUnicast is IPv6's global unicast space: an IPv6 address outside it
// that no range above names is grouped as not-global-unicast.
var globalUnicast = netip.MustParsePrefix("2000::/3")

// addrGroup is the group of a: its range in addrGroups, IPv6 outside
// global unicast, or any other address.
func addrGroup(a netip.Addr) string {
	for _, g := range addrGroups {
		if g.prefix.Contains(a) {
			return g.name
		}
	}
	if a.Is6() && !globalUnicast.Contains(a) {
		return "not-global-unicast"
	}
	return "address"
}

// groupBudget is how many targets of a group a window writes as lines
// past the first maxVerbatim: metadata addresses are the finding that
// matters most, other special ranges next; one per registrable domain.
func groupBudget(group string, isName bool) int {
	switch {
	case isName, group == "address":
		return 1
	case strings.HasPrefix(group, "metadata:"):
		return 8
	}
	return 4
}

// foldGroup names the group a target belongs to, for folding: an address
// range from addrGroups (the address the target spells in any spelling, read
// by LiteralAddr as the resolver would, then the dialled
// address), any other address, or a name's registrable domain. The name is
// the SNI when the ClientHello asked for another host than the CONNECT
// (domain fronting): the SNI is where the client meant to go, and each
// domain it fronted for is a finding of its own, never hidden behind decoys
// fronting for one other domain. A refusal of the address a name resolved
// to (reason in addressReasons) is always grouped by that address, never by
// the name: the name's domain has one line, and an attacker owns it.
// isName says the group is a registrable domain, of which a window holds a
// bounded number.
func foldGroup(target, sni, addr, reason string, nat64 []netip.Prefix) (group string, isName bool) {
	spellings := []string{target, addr}
	if sni != "" {
		// A fronting refusal's address is one the policy allowed for the
		// CONNECT host: the finding is the SNI, whatever address it went to
		// (an address itself, when the server_name was one).
		spellings = []string{sni}
	}
	for _, s := range spellings {
		if a, ok := LiteralAddr(s, nat64); ok {
			if g := addrGroup(a); g != "address" || s == target || s == sni || addressReasons[reason] {
				return g, false
			}
		}
	}
	name := hostOf(target)
	if sni != "" {
		name = sni
	}
	return "name:" + registrableDomain(name), true
}

// registrableDomain is name's registrable domain (its public suffix and one
// label more, so victim-bank.co.uk and evil.co.uk are two domains), or its
// last two labels when the public suffix list has no answer (a name that is
// a public suffix itself, or malformed).
func registrableDomain(name string) string {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if d, err := publicsuffix.EffectiveTLDPlusOne(name); err == nil {
		return d
	}
	labels := strings.Split(name, ".")
	if len(labels) > 2 {
		labels = labels[len(labels)-2:]
	}
	return strings.Join(labels, ".")
}
