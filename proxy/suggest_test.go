package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
)

// TestSuggestionRoundTrip runs an integration with an empty allowlist in
// audit mode, sends its traffic, suggests a permission from the log, checks
// it, enforces it, and sends the same traffic again: it passes, and anything
// else is refused.
func TestSuggestionRoundTrip(t *testing.T) {
	traffic := []string{"api.allowed.example", "a.cdn.allowed.example", "b.cdn.allowed.example", "c.cdn.allowed.example"}
	// No entries: nothing is allowed but by audit mode.
	e := newEnv(t, withHosts(), withConfig(func(c *policy.Config) { c.Integrations[0].Exemptions.Mode = policy.Audit }))
	e.resolveToOrigin(traffic...)
	e.resolveToOrigin("evil.allowed.example")
	send := func(host string) error {
		c := e.client()
		defer c.CloseIdleConnections()
		resp, err := c.Get(e.originURL(host, "/"))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return err
	}
	for _, h := range traffic {
		if err := send(h); err != nil {
			t.Fatalf("audit mode refused %s: %v", h, err)
		}
	}
	e.log.waitEvent(t, map[string]any{"decision": "would_deny", "host": "c.cdn.allowed.example", "exemption": "allow_port:" + itoa(e.origin.Addr.Port()) + ",audit_mode,allow_private:127.0.0.2/32"})

	recs := readRecords(t, e.log)
	entries, skipped := allowlist.Suggest(audit.ObservedHosts(recs)["com.test.weather"], nil)
	if strings.Join(entries, " ") != "a.cdn.allowed.example api.allowed.example b.cdn.allowed.example c.cdn.allowed.example" || len(skipped) != 0 { // exact hosts only (round 45)
		t.Fatalf("suggested %v (skipped %v)", entries, skipped)
	}
	frag, _ := allowlist.NetworkFragment(allowlist.VoiceOS, entries)
	doc := `{"schemaVersion":1,"id":"com.test.weather","version":"1.1.0","runtime":{"kind":"hosted"},"permissions":[` + string(frag) + `]}`
	if m, ps := allowlist.Parse(allowlist.VoiceOSFile, []byte(doc), nil); m == nil || len(ps) != 0 {
		t.Fatalf("suggestion does not pass check: %v", ps)
	}

	e.writeManifest("1.1.0", entries...)
	e.cfg.Integrations[0].Exemptions.Mode = policy.Enforce
	e.cfg.Integrations[0].Widen = policy.WidenAuto
	if outs := e.registry.Load(e.cfg); outs[0].Result != policy.Loaded {
		t.Fatalf("enforce: %+v", outs)
	}
	for _, h := range traffic {
		if err := send(h); err != nil {
			t.Fatalf("enforced suggestion refused %s: %v", h, err)
		}
	}
	if err := send("evil.allowed.example"); err == nil {
		t.Fatal("a host outside the suggestion was allowed")
	}
	e.log.waitEvent(t, map[string]any{"decision": "deny", "reason": "not_allowlisted", "host": "evil.allowed.example"})
}

func readRecords(t *testing.T, b *syncBuffer) []audit.Record {
	var out []audit.Record
	for _, line := range bytes.Split(bytes.TrimSpace([]byte(b.String())), []byte("\n")) {
		var r audit.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}
