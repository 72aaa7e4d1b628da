package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBrokeredRequestEventsVerifyAndReportPerSecret writes request events
// through the real writer, then verifies the chain and builds the report
// from the file: each secret is listed with the hosts it went to and how
// often; a refused request is a refusal of kind "request".
func TestBrokeredRequestEventsVerifyAndReportPerSecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	f, err := OpenFile(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	req := func(host, reason string, secrets ...string) Event {
		e := Event{Kind: Request, Integration: "com.test.weather", Host: host, Port: 443, Conn: "c1",
			Method: "GET", Path: "/v1/items", Status: 200, BytesUp: 10, BytesDown: 20, Secrets: secrets, Decision: "allow"}
		if reason != "" {
			e.Decision, e.Reason, e.Status = "deny", reason, 403
		}
		return e
	}
	for _, e := range []Event{
		{Kind: Connect, Integration: "com.test.weather", Decision: "allow", Reason: "allowed", Host: "api.weather.example", Conn: "c1"},
		req("api.weather.example", "", "WEATHER_KEY"),
		req("api.weather.example", "", "WEATHER_KEY", "ACCOUNT"),
		req("eu.api.weather.example", "", "WEATHER_KEY"),
		req("api.weather.example", "secret_misdirected"),
		{Kind: Close, Integration: "com.test.weather", Conn: "c1", BytesUp: 30, BytesDown: 60},
	} {
		if err := l.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	f.Close()
	v, err := Verify([]string{path}, VerifyOptions{})
	if err != nil || !v.Intact {
		t.Fatalf("verify: %+v %v", v, err)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), `"event":"request"`) || !strings.Contains(string(data), `"secrets":["WEATHER_KEY","ACCOUNT"]`) || !strings.Contains(string(data), `"path":"/v1/items","status":200`) {
		t.Fatalf("request line not written as expected:\n%s", data)
	}
	recs, err := ReadFiles([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	rep := BuildReport(recs, nil)
	ir := rep.Integrations[0]
	var got []string
	for _, u := range ir.Secrets {
		got = append(got, u.Secret+"@"+u.Host+"="+itoa(u.Requests))
	}
	want := "ACCOUNT@api.weather.example=1 WEATHER_KEY@api.weather.example=2 WEATHER_KEY@eu.api.weather.example=1"
	if strings.Join(got, " ") != want {
		t.Fatalf("secrets\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if len(ir.Refused) != 1 || ir.Refused[0].Kind != "request" || ir.Refused[0].Reason != "secret_misdirected" {
		t.Fatalf("refused %+v", ir.Refused)
	}
	var text, html bytes.Buffer
	if err := WriteText(&text, rep); err != nil || !strings.Contains(text.String(), "secrets added:") || !strings.Contains(text.String(), "WEATHER_KEY  eu.api.weather.example") {
		t.Fatalf("text report (%v):\n%s", err, text.String())
	}
	if err := WriteHTML(&html, rep); err != nil || !strings.Contains(html.String(), "Secrets added by egressd") || !strings.Contains(html.String(), "eu.api.weather.example") {
		t.Fatalf("html report (%v)", err)
	}
}
