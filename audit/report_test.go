package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// sampleRecords is a small log: two hosts reached, one refused host three
// ways, a folded flood, a reload, and a hostile host name.
func sampleRecords() []Record {
	return []Record{
		{Time: at(0), Event: "policy", Integration: "com.test.weather", IntegrationVersion: "1.0.0", Action: "loaded", Manifest: "/etc/egressd/weather"},
		{Time: at(1), Event: "connect", Integration: "com.test.weather", IntegrationVersion: "1.0.0", Decision: "allow", Reason: "allowed", Host: "api.weather.example", Rule: "api.weather.example", Conn: "c1"},
		{Time: at(2), Event: "close", Integration: "com.test.weather", Conn: "c1", BytesUp: 100, BytesDown: 2000},
		{Time: at(3), Event: "connect", Integration: "com.test.weather", Decision: "allow", Reason: "allowed", Host: "img.cdn.weather.example", Rule: "*.cdn.weather.example", Conn: "c2"},
		{Time: at(4), Event: "close", Integration: "com.test.weather", Conn: "c2", BytesUp: 10, BytesDown: 20},
		{Time: at(5), Event: "connect", Integration: "com.test.weather", Decision: "deny", Reason: "not_allowlisted", Host: "evil.example"},
		{Time: at(6), Event: "connect", Integration: "com.test.weather", Decision: "deny", Reason: "not_allowlisted", Host: "evil.example", Suppressed: 41},
		{Time: at(7), Event: "connect", Integration: "com.test.weather", Decision: "deny", Reason: "private_address", Host: "evil.example"},
		{Time: at(8), Event: "connect", Integration: "com.test.weather", Decision: "deny", Reason: "ip_literal"},
		{Time: at(9), Event: "connect", Integration: "com.test.weather", Decision: "deny", Reason: "not_allowlisted", Host: `<img src=x onerror=alert(1)>.evil.example`},
		{Time: at(10), Event: "policy", Integration: "com.test.weather", IntegrationVersion: "1.0.0", Action: "kept_last_good", Err: `network.connect[0]: bare IP addresses are not allowed ("10.0.0.1")`},
	}
}

func TestReportFindsUnusedEntriesAndGroupsRefusals(t *testing.T) {
	rep := BuildReport(sampleRecords(), map[string][]string{"com.test.weather": {"api.weather.example", "*.cdn.weather.example", "old.weather.example"}})
	if len(rep.Integrations) != 1 {
		t.Fatalf("%d integrations", len(rep.Integrations))
	}
	ir := rep.Integrations[0]
	if strings.Join(ir.Unused, " ") != "old.weather.example" {
		t.Errorf("unused = %v", ir.Unused)
	}
	if len(ir.Reached) != 2 || ir.Reached[0].BytesDown+ir.Reached[1].BytesDown != 2020 {
		t.Errorf("reached = %+v", ir.Reached)
	}
	var got []string
	for _, f := range ir.Refused {
		got = append(got, f.Reason+" "+f.Host+" "+itoa(f.Count)+" "+f.First.Format("05")+"-"+f.Last.Format("05"))
	}
	want := []string{"ip_literal  1 08-08", "not_allowlisted <img src=x onerror=alert(1)>.evil.example 1 09-09", "not_allowlisted evil.example 42 05-06", "private_address evil.example 1 07-07"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("refused\n got %q\nwant %q", got, want)
	}
	if len(ir.Policy) != 2 || ir.Policy[1].Action != "kept_last_good" || ir.Manifest != "/etc/egressd/weather" {
		t.Errorf("policy = %+v", ir.Policy)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestHTMLReportShowsHostileHostAsText feeds a host name that raw DNS bytes
// allow in a log and checks it is escaped, never markup.
func TestHTMLReportShowsHostileHostAsText(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteHTML(&buf, BuildReport(sampleRecords(), nil)); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	if strings.Contains(html, "<img") || strings.Contains(html, "<script") {
		t.Fatal("hostile host rendered as markup")
	}
	if !strings.Contains(html, "&lt;img src=x onerror=alert(1)&gt;.evil.example") {
		t.Fatal("hostile host not shown as text")
	}
	if !strings.Contains(html, `Content-Security-Policy" content="default-src 'none'`) {
		t.Fatal("no CSP")
	}
}

// TestHTMLReportInChromium loads the report in a real headless Chromium and
// checks the findings are in the rendered page and the hostile name stayed
// text (no img element was created).
func TestHTMLReportInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is required in CI (./scripts/test installs it)")
		}
		t.Skip("chromium not installed")
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var buf bytes.Buffer
	WriteHTML(&buf, BuildReport(sampleRecords(), map[string][]string{"com.test.weather": {"api.weather.example", "*.cdn.weather.example", "old.weather.example"}}))
	os.WriteFile(page, buf.Bytes(), 0o600)
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir=" + filepath.Join(dir, "profile")}
	dom, err := exec.Command(chromium, append(args, "--dump-dom", "file://"+page)...).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	for _, want := range []string{"old.weather.example", "1 declared entry was never tried", "not_allowlisted", "&lt;img src=x onerror=alert(1)&gt;.evil.example", "<svg"} {
		if !strings.Contains(string(dom), want) {
			t.Errorf("rendered page lacks %q", want)
		}
	}
	if strings.Contains(string(dom), "<img") {
		t.Error("the hostile host became an img element")
	}
	shot := filepath.Join(dir, "report.png")
	if out, err := exec.Command(chromium, append(args, "--screenshot="+shot, "--window-size=1000,1400", "file://"+page)...).CombinedOutput(); err != nil {
		t.Fatalf("screenshot: %v %s", err, out)
	}
	if st, err := os.Stat(shot); err != nil || st.Size() < 10000 {
		t.Fatalf("screenshot missing or blank: %v", err)
	}
	if dst := os.Getenv("EGRESSD_REPORT_SCREENSHOT"); dst != "" {
		data, _ := os.ReadFile(shot)
		os.WriteFile(dst, data, 0o644)
	}
}

func TestTriedEntriesMatchAWildcardByExactlyOneLabel(t *testing.T) {
	for _, c := range []struct {
		entry, host string
		want        bool
	}{
		{"*.cdn.example", "img.cdn.example", true},
		{"*.cdn.example", "a.b.cdn.example", false},
		{"*.cdn.example", "cdn.example", false},
		{"api.example:8443", "api.example", true},
		{"api.example", "api.example", true},
		{"api.example", "", false},
	} {
		if got := entryNames(c.entry, c.host); got != c.want {
			t.Errorf("entryNames(%q, %q) = %v", c.entry, c.host, got)
		}
	}
}

// The attacker's r10: a sandboxed program asks DNS for an exfiltration name
// and the metadata name; both are refused by the sandbox's DNS server and
// logged as "event":"dns". The report must show them, text and JSON.
func TestReportShowsSandboxDNSRefusals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	f, err := OpenFile(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := New(f, Options{})
	for _, name := range []string{"c2VjcmV0.exfil.example.net.", "metadata.google.internal."} {
		l.Write(Event{Kind: DNS, Integration: "com.test.weather", Decision: "deny", Reason: "not_allowlisted", Host: strings.TrimSuffix(name, "."), HostRaw: name})
	}
	l.Close()
	f.Close()
	recs, err := ReadFiles([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	rep := BuildReport(recs, nil)
	var text bytes.Buffer
	WriteText(&text, rep)
	js, _ := json.Marshal(rep)
	for _, want := range []string{"c2VjcmV0.exfil.example.net", "metadata.google.internal"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text report omits the DNS refusal of %s:\n%s", want, text.String())
		}
		if !strings.Contains(string(js), `"kind":"dns","reason":"not_allowlisted","host":"`+want+`"`) {
			t.Errorf("the JSON report omits the DNS refusal of %s:\n%s", want, js)
		}
	}
}
