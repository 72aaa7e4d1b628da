package audit

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issue 18, attacker's break 1-3: folding keyed a refusal by the name
// alone, so what the name resolved to, and the port it was asked on, were
// written once and then only counted.

func privateAddress(host, addr string, cname ...string) Event {
	return Event{Kind: Connect, Integration: "com.evil.prober", Decision: "deny", Reason: "private_address",
		Method: "CONNECT", Host: host, HostRaw: host + ":443", Port: 443, Addr: addr, CNAME: cname}
}

// lineFor returns the line (not a summary) whose field key is value.
func lineFor(lines []map[string]any, key, value string) map[string]any {
	for _, l := range lines {
		if l[key] == value && l["suppressed"] == nil {
			return l
		}
	}
	return nil
}

// TestNameRebindingToTheMetadataAddressIsNotFoldedUnderTheName is break 1:
// a name answered (TTL 0) 10.0.0.1, then 169.254.169.254, then 127.0.0.1,
// then 10.7.7.7 within a second. One line for 10.0.0.1 and a summary
// {"target":"seq.evil.example","count":3} was all the log held: the
// metadata attempt was nowhere. Every one is now a line of its own, with
// its CNAME chain.
func TestNameRebindingToTheMetadataAddressIsNotFoldedUnderTheName(t *testing.T) {
	f := newFoldLog(t)
	answers := []string{"10.0.0.1", "169.254.169.254", "127.0.0.1", "10.7.7.7"}
	for _, a := range answers {
		f.s.Write(privateAddress("seq.evil.example", a, "seq.evil.example", "rebind.evil.example"))
		f.clock = f.clock.Add(time.Millisecond)
	}
	lines := f.lines(t)
	for _, a := range answers {
		l := lineFor(lines, "addr", a)
		if l == nil {
			t.Errorf("the attempt at %s has no line of its own:\n%s", a, f.buf.String())
			continue
		}
		if cn, _ := l["cname"].([]any); len(cn) != 2 {
			t.Errorf("the line for %s lost its CNAME chain: %v", a, l)
		}
	}
	if accounted(lines) != int64(len(answers)) {
		t.Errorf("the lines stand for %d events, want %d", accounted(lines), len(answers))
	}
}

// TestRebindingScanKeepsMetadataAndLoopbackLinesAndListsTheAddresses: a
// name rebinding across a hundred private addresses in one second, with
// the metadata address and loopback late in the scan. Each of those two
// keeps a line, and the summary names the addresses it folded (a bounded
// sample, the rest counted).
func TestRebindingScanKeepsMetadataAndLoopbackLinesAndListsTheAddresses(t *testing.T) {
	f := newFoldLog(t)
	const scan = 100
	for i := range scan {
		a := "10.0.0." + strconv.Itoa(i+1)
		switch i {
		case 60:
			a = "169.254.169.254"
		case 80:
			a = "127.0.0.1"
		}
		f.s.Write(privateAddress("seq.evil.example", a))
	}
	f.s.Write(privateAddress("seq.evil.example", "10.0.0.1")) // a repeat folds under its address
	lines := f.lines(t)
	for _, a := range []string{"169.254.169.254", "127.0.0.1"} {
		if lineFor(lines, "addr", a) == nil {
			t.Errorf("%s was folded away in a rebinding scan:\n%s", a, f.buf.String())
		}
	}
	sum := lines[len(lines)-1]
	if !strings.Contains(f.buf.String(), `"target":"seq.evil.example (address 10.0.0.1)","count":1`) {
		t.Errorf("the repeat of 10.0.0.1 is not folded under its address: %v", sum)
	}
	if folded, _ := sum["folded"].([]any); len(folded) < maxSample || sum["unlisted"] == nil {
		t.Errorf("the summary does not list a sample of the addresses and count the rest: %v", sum)
	}
	if accounted(lines) != scan+1 {
		t.Errorf("the lines stand for %d events, want %d", accounted(lines), scan+1)
	}
}

// TestManyNamesRebindingToTheMetadataAddressAreEachNamed: past the metadata
// budget, further names that resolved to it are counted under the address,
// never in the unlisted remainder.
func TestManyNamesRebindingToTheMetadataAddressAreEachNamed(t *testing.T) {
	f := newFoldLog(t)
	for i := range 40 {
		f.s.Write(privateAddress("n"+strconv.Itoa(i)+".evil.example", "169.254.169.254"))
	}
	f.s.Flush(true)
	if strings.Contains(f.buf.String(), `"unlisted"`) {
		t.Errorf("attempts at the metadata address fell into the unlisted remainder:\n%s", f.buf.String())
	}
	if !strings.Contains(f.buf.String(), `"target":"169.254.169.254 (other targets)"`) {
		t.Errorf("no summary names the metadata address:\n%s", f.buf.String())
	}
}

// TestMetadataAddressInSIITAndNAT64FormsIsNamedBehindDecoys is break 2: a
// name resolving to ::ffff:0:a9fe:a9fe (SIIT), which the policy denies as
// 169.254.169.254, behind 13 same-second decoys, was only counted as
// unlisted; so was the CONNECT literal [::ffff:0:a9fe:a9fe]:443. Every
// embedding the policy reads (and the operator's NAT64 prefix, 6to4 and
// Teredo) now puts it in the metadata group.
func TestMetadataAddressInSIITAndNAT64FormsIsNamedBehindDecoys(t *testing.T) {
	forms := []string{
		"::ffff:0:a9fe:a9fe",                   // SIIT
		"64:ff9b::a9fe:a9fe",                   // NAT64 well-known
		"64:ff9b:1:a9fe:a9:fe00::",             // NAT64 local use, /48 layout
		"2a0b:4f00:a9fe:a9fe::",                // the operator's /32 NAT64 prefix
		"2002:a9fe:a9fe::1",                    // 6to4
		"2001:0:4136:e378:8000:63bf:5601:5601", // Teredo, client 169.254.169.254 inverted
		"::a9fe:a9fe",                          // compatible
		"::ffff:169.254.169.254",               // mapped
	}
	for _, form := range forms {
		t.Run("dns_"+form, func(t *testing.T) {
			f := newFoldLog(t)
			f.s.SetNAT64([]netip.Prefix{netip.MustParsePrefix("2a0b:4f00::/32")})
			for i := range 13 {
				f.s.Write(privateAddress("d"+strconv.Itoa(i)+".evil.example", "192.0.2."+strconv.Itoa(i+1)))
			}
			f.s.Write(privateAddress("siit.evil.example", form))
			if lineFor(f.lines(t), "addr", form) == nil {
				t.Errorf("siit.evil.example → %s has no line:\n%s", form, f.buf.String())
			}
		})
		t.Run("literal_"+form, func(t *testing.T) {
			f := newFoldLog(t)
			f.s.SetNAT64([]netip.Prefix{netip.MustParsePrefix("2a0b:4f00::/32")})
			for i := range 13 {
				decoy := "10.0.0." + strconv.Itoa(i+1) + ":443"
				if i == 4 {
					decoy = "192.0.2.1:443"
				}
				f.s.Write(ipLiteral(decoy))
			}
			target := "[" + form + "]:443"
			f.s.Write(ipLiteral(target))
			if lineFor(f.lines(t), "host_raw", target) == nil {
				t.Errorf("%s has no line:\n%s", target, f.buf.String())
			}
		})
	}
}

// TestPortScanOfOneNameKeepsEveryPort is break 3: db.evil.example on 22,
// 6379, 5432 and 2375 wrote one line for 22 and counted 3.
func TestPortScanOfOneNameKeepsEveryPort(t *testing.T) {
	f := newFoldLog(t)
	ports := []uint16{22, 6379, 5432, 2375, 3306, 11211, 9200, 27017}
	for _, p := range ports {
		f.s.Write(Event{Kind: Connect, Integration: "com.evil.prober", Decision: "deny", Reason: "port_not_allowed",
			Method: "CONNECT", Host: "db.evil.example", HostRaw: "db.evil.example:" + strconv.Itoa(int(p)), Port: p})
	}
	f.s.Flush(true)
	recs := f.records(t)
	for _, p := range ports {
		target := "db.evil.example:" + strconv.Itoa(int(p))
		named := false
		for _, r := range recs {
			named = named || r.Accounts(target)
		}
		if !named {
			t.Errorf("port %d is not named in the log:\n%s", p, f.buf.String())
		}
	}
}

func TestLiteralAddrReadsEveryEmbeddingThePolicyDenies(t *testing.T) {
	nat64 := []netip.Prefix{netip.MustParsePrefix("2a0b:4f00::/32")}
	for in, want := range map[string]string{
		"[::ffff:0:a9fe:a9fe]:443":                   "169.254.169.254",
		"[64:ff9b:1:a9fe:a9:fe00::]:443":             "169.254.169.254",
		"[2a0b:4f00:a9fe:a9fe::]:443":                "169.254.169.254",
		"[2002:a9fe:a9fe::1]:443":                    "169.254.169.254",
		"[2001:0:4136:e378:8000:63bf:5601:5601]:443": "169.254.169.254",
		"[::1]:443": "::1",
	} {
		if a, ok := LiteralAddr(in, nat64); !ok || a.String() != want {
			t.Errorf("LiteralAddr(%q) = %v, %v; want %s", in, a, ok, want)
		}
	}
}
