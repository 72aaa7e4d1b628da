package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/policy"
)

// wptCase is one host-parsing case from the web-platform-tests URL suite
// (testdata/url-hosts-wpt.json; its "about" and "sources" say where from).
type wptCase struct {
	Input    string   `json:"input"`
	RawHost  string   `json:"raw_host"`
	Expected string   `json:"expected_host_or_failure"`
	IsIP     bool     `json:"is_ip"`
	Category []string `json:"category"`
}

func loadWPT(t *testing.T) []wptCase {
	data, err := os.ReadFile("testdata/url-hosts-wpt.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Cases []wptCase }
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Cases
}

// wptExpect is egressd's rule for a CONNECT host, written out on its own:
// anything outside ASCII letters, digits, '-' and '.' is a bad request
// (egressd maps nothing, and '%' is never decoded); brackets and colons are
// IPv6 literals; a name whose last label is a number (decimal, octal or
// 0x hex) is an IPv4 literal, as browsers and glibc read it; a name with an
// empty label, a label over 63 octets or an edge hyphen is a bad request;
// any other name is simply not on this manifest's list.
func wptExpect(raw string) string {
	for _, c := range []byte(raw) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte("%@*/\\?#", c) >= 0 {
			return "bad_request"
		}
	}
	if strings.ContainsAny(raw, "[]") {
		// net/http itself refuses a bracketed host that is not an IPv6
		// address, before egressd's handler; it is audited as bad_request.
		if !strings.HasPrefix(raw, "[") || !strings.HasSuffix(raw, "]") {
			return "bad_request"
		}
		if _, err := netip.ParseAddr(raw[1 : len(raw)-1]); err != nil {
			return "bad_request"
		}
		return "ip_literal"
	}
	if strings.Contains(raw, ":") {
		return "ip_literal"
	}
	host := strings.TrimSuffix(raw, ".")
	if host == "" || len(host) > 253 {
		return "bad_request"
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "bad_request"
		}
		for _, c := range []byte(l) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return "bad_request"
			}
		}
	}
	last := strings.ToLower(labels[len(labels)-1])
	if strings.Trim(last, "0123456789") == "" || (strings.HasPrefix(last, "0x") && strings.Trim(last[2:], "0123456789abcdef") == "") {
		return "ip_literal"
	}
	return "not_allowlisted"
}

var reasonStatus = map[string]int{"bad_request": 400, "ip_literal": 403, "not_allowlisted": 403, "dns_error": 502, "private_address": 403}

// TestHostileConnectTargets sends every WPT host case and every SSRF case
// (testdata/ssrf-hosts.json, each with its source) to the real handler as a
// CONNECT target, and checks the exact status and reason code. Then it
// checks the audit log accounts for every one of them, folded or not.
func TestHostileConnectTargets(t *testing.T) {
	type tc struct{ name, host, want string }
	var cases []tc
	for i, c := range loadWPT(t) {
		cases = append(cases, tc{name: "wpt_" + strings.Join(c.Category, "+") + "_" + itoa(uint16(i)), host: c.RawHost, want: wptExpect(c.RawHost)})
	}
	data, _ := os.ReadFile("testdata/ssrf-hosts.json")
	var ssrf struct {
		Cases []struct{ Host, Expect, Source string }
	}
	if err := json.Unmarshal(data, &ssrf); err != nil {
		t.Fatal(err)
	}
	for i, c := range ssrf.Cases {
		cases = append(cases, tc{name: "ssrf_" + itoa(uint16(i)), host: c.Host, want: c.Expect})
	}
	e := newEnv(t, withConfig(func(c *policy.Config) { c.Limits.ConnectionsPerSecond, c.Limits.Burst = 1e9, 1<<30 }))
	passed := 0
	for _, c := range cases {
		resp, err := e.sendConnect(c.host + ":443")
		if err != nil {
			t.Errorf("%s (%q): %v", c.name, c.host, err)
			continue
		}
		got := resp.Header.Get(ReasonHeader)
		if resp.StatusCode != reasonStatus[c.want] || got != c.want {
			t.Errorf("%s (%q): got %d %s, want %d %s", c.name, c.host, resp.StatusCode, got, reasonStatus[c.want], c.want)
			continue
		}
		passed++
	}
	t.Logf("%d of %d hostile CONNECT targets answered exactly as expected", passed, len(cases))
	e.srv.opts.Suppress.Flush(true)
	var decided int64
	for _, ev := range e.log.events(t) {
		if ev["event"] == "connect" && ev["decision"] == "deny" {
			decided += foldedCount(ev)
		}
	}
	if decided != int64(len(cases)) {
		byReason := map[string]int64{}
		for _, ev := range e.log.events(t) {
			if ev["event"] == "connect" && ev["decision"] == "deny" {
				byReason[ev["reason"].(string)] += foldedCount(ev)
			}
		}
		want := map[string]int{}
		for _, c := range cases {
			want[c.want]++
		}
		t.Errorf("audit log accounts for %d refusals, %d were sent: %v, want %v", decided, len(cases), byReason, want)
	}
}

// sendConnect writes one raw CONNECT and reads the answer.
func (e *env) sendConnect(target string) (*http.Response, error) {
	c, br, resp := e.rawConnectErr("CONNECT " + target + " HTTP/1.1\r\n\r\n")
	if c == nil {
		return nil, io.ErrUnexpectedEOF
	}
	defer c.Close()
	if resp != nil {
		io.Copy(io.Discard, resp.Body)
	}
	_ = br
	return resp, nil
}

// TestWPTHostsAsManifestEntries feeds every WPT host to ParseEntry: an IP
// in any spelling is refused, and a name egressd accepts is exactly the
// name the URL standard says a browser would connect to.
func TestWPTHostsAsManifestEntries(t *testing.T) {
	accepted := 0
	for i, c := range loadWPT(t) {
		e, _, err := allowlist.ParseEntry(c.RawHost)
		if err != nil {
			continue
		}
		accepted++
		if c.IsIP {
			t.Errorf("case %d: %q is an IP to the URL standard, and egressd accepted it as %q", i, c.RawHost, e)
			continue
		}
		want := strings.TrimSuffix(strings.ToLower(c.Expected), ".")
		if c.Expected == "failure" || e.String() != want {
			t.Errorf("case %d: %q: egressd's entry %q, the URL standard's host %q", i, c.RawHost, e, c.Expected)
		}
	}
	t.Logf("%d WPT hosts accepted as entries, each the URL standard's own host", accepted)
}

// foldedCount is how many decisions an audit line stands for: one, or for
// a summary line, the number of repeats it folded.
func foldedCount(ev map[string]any) int64 {
	if n, ok := ev["suppressed"].(float64); ok && n > 0 {
		return int64(n)
	}
	return 1
}
