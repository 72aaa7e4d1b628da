package audit

import (
	"net/netip"
	"strconv"
	"strings"
)

// foldClass is what a summary line stands for: refusals alike in every
// field a reviewer groups by, except the target. Only fields egressd or the
// operator chose are in it (never the method or anything else the client
// sends), so a client cannot open a new class, and a new line, per request.
func foldClass(e Event) string {
	return strings.Join([]string{string(e.Kind), e.Integration, strconv.FormatUint(e.Generation, 10), e.Decision, e.Reason, e.Listener}, "|")
}

// foldTarget is what was asked for: the canonical host, or as sent when it
// is not a host name (an IP literal, a bad request), or the peer a unix
// listener refused.
func foldTarget(e Event) string {
	switch {
	case e.Host != "" && e.SNI != "":
		return withSNI(Cap(e.Host, maxHostRaw), Cap(e.SNI, maxHostRaw))
	case e.Host != "":
		return Cap(e.Host, maxHostRaw)
	case e.HostRaw != "":
		return quoteRaw(e.HostRaw)
	case e.Addr != "":
		return Cap(e.Addr, maxField)
	}
	return Cap(e.Msg, maxField)
}

// withSNI names a target whose ClientHello asked for another host: folding
// and the report keep each SNI apart.
func withSNI(host, sni string) string { return host + " (SNI " + sni + ")" }

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
}

// groupBudget is how many targets of a group a window writes as lines
// past the first maxVerbatim: metadata addresses are the finding that
// matters most, other special ranges next.
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
// address), any other address, or a name's parent domain (its last two
// labels). isName says the group is a parent domain, of which a window
// holds a bounded number.
func foldGroup(target, addr string) (group string, isName bool) {
	for _, s := range []string{target, addr} {
		if a, ok := LiteralAddr(s); ok {
			for _, g := range addrGroups {
				if g.prefix.Contains(a) {
					return g.name, false
				}
			}
			if s == target {
				return "address", false
			}
		}
	}
	name := strings.TrimSuffix(strings.ToLower(target), ".")
	labels := strings.Split(name, ".")
	if len(labels) > 2 {
		labels = labels[len(labels)-2:]
	}
	return "name:" + strings.Join(labels, "."), true
}
