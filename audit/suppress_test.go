package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// foldLog is a Log into a buffer with a Suppressor on a clock the test
// moves.
type foldLog struct {
	buf   bytes.Buffer
	log   *Log
	s     *Suppressor
	clock time.Time
}

func newFoldLog(t *testing.T) *foldLog {
	f := &foldLog{clock: t0}
	l, err := New(&f.buf, Options{Now: func() time.Time { return f.clock }})
	if err != nil {
		t.Fatal(err)
	}
	f.log, f.s = l, NewSuppressor(l, time.Second)
	f.s.now = func() time.Time { return f.clock }
	return f
}

// lines returns the connect and dns lines, decoded.
func (f *foldLog) lines(t *testing.T) []map[string]any {
	f.s.Flush(true)
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(f.buf.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		if m["event"] == "connect" || m["event"] == "dns" {
			out = append(out, m)
		}
	}
	return out
}

// accounted is how many events the lines stand for: each line one, plus
// each summary's suppressed.
func accounted(lines []map[string]any) int64 {
	var n int64
	for _, l := range lines {
		if s, ok := l["suppressed"].(float64); ok {
			n += int64(s)
		} else {
			n++
		}
	}
	return n
}

func ipLiteral(target string) Event {
	return Event{Kind: Connect, Integration: "com.test.weather", Decision: "deny", Reason: "ip_literal", Method: "CONNECT", HostRaw: target}
}

func TestIPLiteralsToDistinctAddressesInOneSecondKeepEveryAddress(t *testing.T) {
	f := newFoldLog(t)
	for _, target := range []string{"1.1.1.1:443", "169.254.169.254:443", "10.0.0.1:443"} {
		f.s.Write(ipLiteral(target))
		f.clock = f.clock.Add(time.Millisecond)
	}
	lines := f.lines(t)
	for _, want := range []string{"1.1.1.1:443", "169.254.169.254:443", "10.0.0.1:443"} {
		if !strings.Contains(f.buf.String(), `"host_raw":"`+want+`"`) {
			t.Errorf("%s is not in the log:\n%s", want, f.buf.String())
		}
	}
	if accounted(lines) != 3 {
		t.Errorf("the lines stand for %d events, want 3", accounted(lines))
	}
}

func TestRandomSubdomainFloodFoldsIntoBoundedLines(t *testing.T) {
	f := newFoldLog(t)
	const events = 100000
	// 100 ms of flood per 10,000 names: 100,000 names over one second.
	for i := range events {
		f.s.Write(Event{Kind: DNS, Integration: "com.test.weather", Decision: "deny", Reason: "not_allowlisted",
			Host: "r" + strconv.Itoa(i) + ".flood.example", HostRaw: "r" + strconv.Itoa(i) + ".flood.example."})
		if i%10000 == 9999 {
			f.clock = f.clock.Add(100 * time.Millisecond)
		}
	}
	lines := f.lines(t)
	t.Logf("%d distinct names in 1 s: %d lines, %d bytes", events, len(lines), f.buf.Len())
	if len(lines) > maxVerbatim+1+maxVerbatim+1 || f.buf.Len() > 16<<10 {
		t.Fatalf("%d lines, %d bytes for one second of flood", len(lines), f.buf.Len())
	}
	if accounted(lines) != events {
		t.Fatalf("the lines stand for %d events, want %d", accounted(lines), events)
	}
	last := lines[len(lines)-1]
	folded, _ := last["folded"].([]any)
	if len(folded) != maxSample || last["unlisted"] == nil {
		t.Fatalf("the summary lists %d targets (want a sample of %d) and unlisted=%v: %v", len(folded), maxSample, last["unlisted"], last)
	}
}

func TestFloodOfAddressesNeverHidesTheMetadataAddress(t *testing.T) {
	f := newFoldLog(t)
	const events = 100000
	for i := range events {
		target := "203.0." + strconv.Itoa(113+i%2) + "." + strconv.Itoa(i%256) + ":" + strconv.Itoa(1024+i%50000)
		switch i {
		case 50000:
			target = "169.254.169.254:80"
		case 70000:
			target = "10.1.2.3:22"
		case 90000:
			target = "[fd00:ec2::254]:80"
		}
		f.s.Write(ipLiteral(target))
	}
	lines := f.lines(t)
	t.Logf("%d distinct addresses in one window: %d lines, %d bytes", events, len(lines), f.buf.Len())
	for _, want := range []string{"169.254.169.254:80", "10.1.2.3:22", "[fd00:ec2::254]:80"} {
		if !strings.Contains(f.buf.String(), `"host_raw":"`+want+`"`) {
			t.Errorf("%s was lost in the flood", want)
		}
	}
	if len(lines) > maxLinesPerWindow() || accounted(lines) != events {
		t.Fatalf("%d lines standing for %d events", len(lines), accounted(lines))
	}
}

func TestFloodOverManySecondsIsBoundedPerSecond(t *testing.T) {
	f := newFoldLog(t)
	const seconds, perSecond = 20, 5000
	for s := range seconds {
		for i := range perSecond {
			f.s.Write(ipLiteral("203.0.113." + strconv.Itoa(i%256) + ":" + strconv.Itoa(1024+s*perSecond+i)))
			f.clock = f.clock.Add(time.Second / perSecond)
		}
	}
	lines := f.lines(t)
	t.Logf("%d events over %d s: %d lines, %d bytes", seconds*perSecond, seconds, len(lines), f.buf.Len())
	if len(lines) > seconds*(maxVerbatim+2)+2 || accounted(lines) != seconds*perSecond {
		t.Fatalf("%d lines standing for %d events over %d s", len(lines), accounted(lines), seconds)
	}
}

func TestRepeatsOfOneRefusalFoldIntoOneSummaryWithItsTarget(t *testing.T) {
	f := newFoldLog(t)
	for range 5 {
		f.s.Write(ipLiteral("169.254.169.254:443"))
	}
	lines := f.lines(t)
	if len(lines) != 2 || lines[1]["suppressed"] != float64(4) {
		t.Fatalf("%d lines: %v", len(lines), lines)
	}
	folded := lines[1]["folded"].([]any)[0].(map[string]any)
	if folded["target"] != "169.254.169.254:443" || folded["count"] != float64(4) {
		t.Fatalf("summary = %v", lines[1])
	}
}

func TestReportOfAFoldedFloodListsEveryRecordedTargetAndCountsTheRest(t *testing.T) {
	f := newFoldLog(t)
	const events = 10000
	for i := range events {
		target := "203.0.113." + strconv.Itoa(i%256) + ":" + strconv.Itoa(1024+i)
		if i == 5000 {
			target = "169.254.169.254:80"
		}
		f.s.Write(ipLiteral(target))
	}
	f.s.Flush(true)
	var recs []Record
	sc := bufio.NewScanner(bytes.NewReader(f.buf.Bytes()))
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	rep := BuildReport(recs, nil)
	var total int64
	rows := map[string]int64{}
	for _, r := range rep.Integrations[0].Refused {
		total += r.Count
		rows[r.Host] = r.Count
	}
	if total != events || rows["169.254.169.254:80"] != 1 || rows[UnlistedTargets] == 0 || len(rows) > maxVerbatim+maxSample+2 {
		t.Fatalf("%d refusals reported in %d rows, want %d: %v", total, len(rows), events, rows)
	}
}

func TestRandomMethodsDoNotOpenAClassEach(t *testing.T) {
	f := newFoldLog(t)
	const events = 10000
	for i := range events {
		e := Event{Kind: Connect, Integration: "com.test.weather", Decision: "deny", Reason: "method_not_allowed", Method: "M" + strconv.Itoa(i), HostRaw: "/"}
		f.s.Write(e)
	}
	if lines := f.lines(t); len(lines) > 2 || accounted(lines) != events {
		t.Fatalf("%d lines for %d requests with distinct methods", len(lines), events)
	}
}

// maxLinesPerWindow is the most lines one class writes in one window: the
// first targets, every group's budget, and the summary.
func maxLinesPerWindow() int {
	n := maxVerbatim + maxNameGroups*groupBudget("name:x", true) + groupBudget("address", false) + groupBudget("not-global-unicast", false) + 1
	seen := map[string]bool{}
	for _, g := range addrGroups {
		if !seen[g.name] {
			seen[g.name] = true
			n += groupBudget(g.name, false)
		}
	}
	return n
}

func TestFloodAcrossEveryGroupAtOnceIsStillBounded(t *testing.T) {
	f := newFoldLog(t)
	const events = 100000
	for i := range events {
		port := strconv.Itoa(1024 + i%60000)
		var target string
		switch i % 8 {
		case 0:
			target = "10." + strconv.Itoa(i%250) + ".0.1:" + port
		case 1:
			target = "169.254." + strconv.Itoa(i%250) + ".1:" + port
		case 2:
			target = "127.0." + strconv.Itoa(i%250) + ".1:" + port
		case 3:
			target = addrGroups[i%6].prefix.Addr().String() + ":" + port
		case 4:
			target = "203.0.113." + strconv.Itoa(i%250) + ":" + port
		case 5:
			target = "100.64.0." + strconv.Itoa(i%250) + ":" + port
		case 6:
			target = "[fe80::" + strconv.FormatInt(int64(i), 16) + "]:" + port
		default:
			target = "a" + strconv.Itoa(i) + ".p" + strconv.Itoa(i) + ".example:" + port
		}
		f.s.Write(ipLiteral(target))
	}
	lines := f.lines(t)
	t.Logf("%d events across every group in one window: %d lines (bound %d), %d bytes", events, len(lines), maxLinesPerWindow(), f.buf.Len())
	if len(lines) > maxLinesPerWindow() || accounted(lines) != events {
		t.Fatalf("%d lines standing for %d events", len(lines), accounted(lines))
	}
}

func TestFoldedDomainFrontingKeepsEachSNIApart(t *testing.T) {
	f := newFoldLog(t)
	for i := range 20 {
		f.s.Write(Event{Kind: Connect, Integration: "com.test.weather", Decision: "deny", Reason: "sni_mismatch", Host: "api.allowed.example", SNI: "front" + strconv.Itoa(i%2) + ".evil.example"})
	}
	f.s.Flush(true)
	for _, want := range []string{`"sni":"front0.evil.example"`, `"sni":"front1.evil.example"`, `"target":"api.allowed.example (SNI front1.evil.example)","count":9`} {
		if !strings.Contains(f.buf.String(), want) {
			t.Errorf("%s not in:\n%s", want, f.buf.String())
		}
	}
}

// records reads the connect and dns lines back as a report would.
func (f *foldLog) records(t *testing.T) []Record {
	var out []Record
	for _, l := range f.lines(t) {
		b, _ := json.Marshal(l)
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestAHandfulOfTargetsIsEachAccountedForByName: within one class and
// second, the first maxVerbatim+maxSample distinct targets are each named,
// as a line or in the summary's sample (Record.Accounts); past that a plain
// address is only counted, while the metadata address still gets a line.
func TestAHandfulOfTargetsIsEachAccountedForByName(t *testing.T) {
	f := newFoldLog(t)
	var handful []string
	for i := range maxVerbatim + maxSample {
		handful = append(handful, "198.51.100."+strconv.Itoa(i+1)+":443")
	}
	for _, target := range append(handful, "203.0.113.99:443", "169.254.169.254:80") {
		f.s.Write(ipLiteral(target))
	}
	recs := f.records(t)
	named := func(target string) bool {
		for _, r := range recs {
			if r.Accounts(target) {
				return true
			}
		}
		return false
	}
	for _, target := range append(handful, "169.254.169.254:80") {
		if !named(target) {
			t.Errorf("%s is not named in the log:\n%s", target, f.buf.String())
		}
	}
	if named("203.0.113.99:443") || named("") {
		t.Errorf("a target past the sample is named, or the empty target is:\n%s", f.buf.String())
	}
	if n := accounted(f.lines(t)); n != int64(len(handful)+2) {
		t.Errorf("the lines stand for %d events, want %d", n, len(handful)+2)
	}
}
