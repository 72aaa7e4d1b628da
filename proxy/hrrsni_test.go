package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
)

// TestSecondHelloNamingOtherHostsIsRecordedByItsSNI is issue 18's break 5:
// after a HelloRetryRequest, second ClientHellos naming other hosts were
// refused (sni_mismatch) with no "sni" field, so they folded under the
// CONNECT host (the other hosts vanished), and the report counted each
// refused tunnel as reached. Each refusal now carries the second hello's
// SNI, is not folded away, and the report does not count it as reached.
func TestSecondHelloNamingOtherHostsIsRecordedByItsSNI(t *testing.T) {
	fronted := []string{"evil.allowed.example", "secret2.allowed.example"}
	var ports []uint16
	var seconds []chan string
	for range fronted {
		port, second := frontEnd(t)
		ports, seconds = append(ports, port), append(seconds, second)
	}
	e := newEnv(t, withConfig(func(c *policy.Config) {
		c.Integrations[0].Exemptions.AllowPorts = append(c.Integrations[0].Exemptions.AllowPorts, ports...)
	}))
	e.resolveToOrigin("api.allowed.example")
	for i, sni := range fronted {
		c, br, resp := e.rawConnect("CONNECT api.allowed.example:" + itoa(ports[i]) + " HTTP/1.1\r\n\r\n")
		if resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %d %s", resp.StatusCode, resp.Header.Get(ReasonHeader))
		}
		c.Write(buildHello(helloSpec{names: []string{"api.allowed.example"}}))
		if hrr, err := readRecord(br); err != nil || !isHelloRetry(hrr) {
			t.Fatalf("the HelloRetryRequest was not relayed: %v %x", err, hrr)
		}
		c.Write(buildHello(helloSpec{names: []string{sni}}))
		if got := <-seconds[i]; got != "closed before a second hello" {
			t.Fatalf("the front end saw: %s", got)
		}
		c.Close()
		e.log.waitEvent(t, map[string]any{"event": "connect", "decision": "deny", "reason": "sni_mismatch", "sni": sni})
		e.log.waitEvent(t, map[string]any{"event": "close", "port": int(ports[i])})
	}
	var recs []audit.Record
	sc := bufio.NewScanner(bytes.NewReader([]byte(e.log.String())))
	for sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	rep := audit.BuildReport(recs, nil)
	if len(rep.Integrations) != 1 || len(rep.Integrations[0].Reached) != 0 {
		t.Fatalf("refused tunnels are reported as reached: %+v", rep.Integrations)
	}
}

// TestSecondHelloWithAServerNameThatIsNoHostNameRecordsItRaw is issue 18's
// third attacker, finding 2, after a HelloRetryRequest: a second hello
// whose server_name is no host name is recorded as sent, escaped, in
// sni_raw.
func TestSecondHelloWithAServerNameThatIsNoHostNameRecordsItRaw(t *testing.T) {
	port, second := frontEnd(t)
	e := newEnv(t, withConfig(func(c *policy.Config) {
		c.Integrations[0].Exemptions.AllowPorts = append(c.Integrations[0].Exemptions.AllowPorts, port)
	}))
	e.resolveToOrigin("api.allowed.example")
	c, br, resp := e.rawConnect("CONNECT api.allowed.example:" + itoa(port) + " HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d %s", resp.StatusCode, resp.Header.Get(ReasonHeader))
	}
	defer c.Close()
	c.Write(buildHello(helloSpec{names: []string{"api.allowed.example"}}))
	if hrr, err := readRecord(br); err != nil || !isHelloRetry(hrr) {
		t.Fatalf("the HelloRetryRequest was not relayed: %v %x", err, hrr)
	}
	c.Write(buildHello(helloSpec{names: []string{"evil_front.other\x00.example"}}))
	if got := <-second; got != "closed before a second hello" {
		t.Fatalf("the front end saw: %s", got)
	}
	e.log.waitEvent(t, map[string]any{"event": "connect", "decision": "deny", "reason": "sni_mismatch", "sni_raw": `evil_front.other\x00.example`})
}
