package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
)

// TestConnectionsHeldAcrossTheRemovalOfTheirIntegrationKeepItsIdentity is
// issue 18's ninth-round break f6: an integration holds connections open
// on its listener, its folder is removed and egressd reloads (policy
// "removed"), then it sends a CONNECT on each. The attempts were logged
// with no integration, as bad_request "connection closed before a
// complete request" (the request was complete), and `audit report`
// dropped them. Each is now refused 403 integration_removed, logged under
// the integration the listener accepted it for, and reported there.
func TestConnectionsHeldAcrossTheRemovalOfTheirIntegrationKeepItsIdentity(t *testing.T) {
	e := newEnv(t)
	current := e.cfg
	current.Timeouts.RequestHeader = time.Minute // the held connections send only after the reload
	d := &Daemon{
		LoadConfig: func() (policy.Config, error) { return current, nil },
		Registry:   policy.NewRegistry(policy.InMemory(), nil),
		Audit:      e.audit, Suppress: audit.NewSuppressor(e.audit, time.Second), Metrics: NewMetrics(nil),
		Resolver: NewResolver([]string{e.dns.Addr}, 5*time.Second), Gate: NewGate(1000),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	var listen string
	for _, a := range d.Listeners() {
		listen = a
	}
	// net/http drops a request that arrives once the listener's server is
	// shutting down without running a handler: the attempts after this
	// closes take that path, the first may reach the handler.
	shuttingDown := make(chan struct{})
	d.mu.Lock()
	for _, l := range d.listeners {
		l.server.http.RegisterOnShutdown(func() { close(shuttingDown) })
	}
	d.mu.Unlock()
	const held = 3
	var conns []net.Conn
	for range held {
		c, err := net.Dial("tcp", listen)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second)) // a failsafe only
		conns = append(conns, c)
	}
	waitFor(t, func() bool { return d.Gate.Open() == held })

	current.Integrations = nil // the integration's folder is gone
	reloaded := make(chan error, 1)
	go func() { reloaded <- d.Reload(ctx) }()
	e.log.waitEvent(t, map[string]any{"event": "policy", "action": "removed", "integration": "com.test.weather"})

	for i, c := range conns {
		if i == 1 {
			<-shuttingDown
		}
		host := "hidden" + strconv.Itoa(i) + ".evil.example"
		io.WriteString(c, "CONNECT "+host+":443 HTTP/1.1\r\nHost: "+host+":443\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatalf("held connection %d: no answer to its CONNECT: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get(ReasonHeader) != string(policy.IntegrationRemoved) {
			t.Fatalf("held connection %d: %d %q %q, want 403 integration_removed", i, resp.StatusCode, resp.Header.Get(ReasonHeader), body)
		}
		e.log.waitEvent(t, map[string]any{"event": "connect", "decision": "deny", "reason": "integration_removed",
			"integration": "com.test.weather", "host": host})
	}
	if err := <-reloaded; err != nil {
		t.Fatal(err)
	}

	var recs []audit.Record
	for _, l := range e.log.events(t) {
		b, _ := json.Marshal(l)
		var r audit.Record
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		if r.Event == "connect" && r.Integration == "" {
			t.Errorf("a connect record has no integration: %s", b)
		}
		recs = append(recs, r)
	}
	rep := audit.BuildReport(recs, nil)
	var refused int64
	for _, ir := range rep.Integrations {
		for _, f := range ir.Refused {
			if ir.ID == "com.test.weather" && f.Reason == string(policy.IntegrationRemoved) {
				refused += f.Count
			}
		}
	}
	if refused != held {
		t.Fatalf("the report counts %d integration_removed refusals under com.test.weather, want %d: %+v", refused, held, rep.Integrations)
	}
}
