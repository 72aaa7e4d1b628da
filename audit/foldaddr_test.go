package audit

import (
	"strconv"
	"testing"
)

// Issue 18 (third attacker), finding 1: a refusal of an address the policy
// denies but addrGroups did not know (Azure's WireServer 168.63.129.16,
// the benchmark, documentation and IETF ranges, IPv6 outside 2000::/3) fell
// back to the name's registrable domain, whose budget is one line, and was
// hidden behind decoys in the same domain.

// TestWireServerRefusalBehindBenchmarkDecoysHasALine is the attacker's
// script: 13 names in atk.example resolving to 198.18.0.i, then
// wire.atk.example resolving to 168.63.129.16, all in one second. Neither
// the name nor the address was anywhere in the log.
func TestWireServerRefusalBehindBenchmarkDecoysHasALine(t *testing.T) {
	f := newFoldLog(t)
	for i := range 13 {
		f.s.Write(privateAddress("b"+strconv.Itoa(i)+".atk.example", "198.18.0."+strconv.Itoa(i+1)))
	}
	f.s.Write(privateAddress("wire.atk.example", "168.63.129.16"))
	if lineFor(f.lines(t), "addr", "168.63.129.16") == nil {
		t.Fatalf("the refusal of Azure's WireServer address has no line:\n%s", f.buf.String())
	}
}

// TestAddressRefusalsAreGroupedByAddressNeverByTheName: behind 13 decoys
// in one special range, an attempt at each other range the policy denies
// keeps a line: the group is the address's, never the name's domain.
func TestAddressRefusalsAreGroupedByAddressNeverByTheName(t *testing.T) {
	targets := []string{"192.0.0.9", "192.0.2.7", "192.88.99.1", "198.51.100.7", "203.0.113.7",
		"2001:db8::7", "100::7", "3fff::7", "5f00::7", "4000::7", "fec0::7", "2002:c000:0204::1",
		"100.100.100.200", "169.254.170.2", "fd00:ec2::254", "169.254.169.254",
		"192.175.48.1", "192.31.196.1", "192.52.193.1"}
	for _, target := range targets {
		f := newFoldLog(t)
		for i := range 13 {
			f.s.Write(privateAddress("b"+strconv.Itoa(i)+".atk.example", "198.18.0."+strconv.Itoa(i+1)))
		}
		f.s.Write(privateAddress("x.atk.example", target))
		if lineFor(f.lines(t), "addr", target) == nil {
			t.Errorf("the refusal of %s behind decoys has no line:\n%s", target, f.buf.String())
		}
	}
}

// TestAddressGroupsNameEveryCloudMetadataAddress: each cloud metadata
// address (WireServer included) is its own always-named group.
func TestAddressGroupsNameEveryCloudMetadataAddress(t *testing.T) {
	for _, a := range []string{"168.63.129.16", "169.254.169.254", "fd00:ec2::254", "100.100.100.200", "169.254.170.2"} {
		g, isName := foldGroup("x.atk.example (address "+a+")", "", a, "private_address", nil)
		if g != "metadata:"+a || isName {
			t.Errorf("%s is in group %q (name %v), want metadata:%s", a, g, isName, a)
		}
	}
	if g, isName := foldGroup("x.atk.example (address 198.18.0.1)", "", "198.18.0.1", "private_address", nil); isName {
		t.Errorf("a refused address is grouped by the name's domain: %q", g)
	}
}

// TestFrontingTargetsThatAreNoHostNamesFoldApart is the third attacker's
// finding 2: fronting refusals whose server_name is no host name carried
// no SNI, so all but the first folded as repeats of the CONNECT host. Each
// is now a target of its own (by its escaped server_name); one that is the
// metadata address is grouped as the metadata address, behind 13 decoys.
func TestFrontingTargetsThatAreNoHostNamesFoldApart(t *testing.T) {
	f := newFoldLog(t)
	fronted := func(raw string) Event {
		return Event{Kind: Connect, Integration: "com.evil.prober", Decision: "deny", Reason: "sni_mismatch",
			Method: "CONNECT", Host: "ok.atk.example", HostRaw: "ok.atk.example:443", Port: 443, Addr: "192.0.2.1:443", SNIRaw: raw}
	}
	for i := range 13 {
		f.s.Write(fronted("decoy_" + strconv.Itoa(i) + ".decoys.example"))
	}
	sent := []string{"evil_front.other-cdn.example", "169.254.169.254", "ok.atk.example.", "ok.atk.example\x00.evil.example"}
	for _, raw := range sent {
		f.s.Write(fronted(raw))
	}
	lines := f.lines(t)
	for _, raw := range sent {
		if lineFor(lines, "sni_raw", quoteRaw(raw)) == nil {
			t.Errorf("the fronting attempt at %q has no line:\n%s", raw, f.buf.String())
		}
	}
	if accounted(lines) != 13+int64(len(sent)) {
		t.Errorf("the lines stand for %d events, want %d", accounted(lines), 13+len(sent))
	}
}

// TestIPv4AS112AndAMTRefusalsAreGroupedLikeTheirIPv6Twins: the policy
// refuses 192.175.48.0/24, 192.31.196.0/24 (AS112) and 192.52.193.0/24
// (AMT) as it refuses their IPv6 twins; folding names their groups rather
// than the catch-all "address".
func TestIPv4AS112AndAMTRefusalsAreGroupedLikeTheirIPv6Twins(t *testing.T) {
	for a, want := range map[string]string{"192.175.48.1": "as112", "192.31.196.1": "as112", "2620:4f:8000::1": "as112", "192.52.193.1": "amt"} {
		if g, isName := foldGroup("x.atk.example (address "+a+")", "", a, "private_address", nil); g != want || isName {
			t.Errorf("%s is in group %q (name %v), want %s", a, g, isName, want)
		}
	}
}
