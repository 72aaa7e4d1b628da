package proxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
)

// soakDuration is 60 s, or 3 s with -short.
func soakDuration() time.Duration {
	if testing.Short() {
		return 3 * time.Second
	}
	return 60 * time.Second
}

// TestSoakMixedTrafficWithReloads runs allowed and denied traffic from
// several clients while the policy reloads, then checks that every byte of
// every allowed tunnel is in the close events and nothing leaked.
func TestSoakMixedTrafficWithReloads(t *testing.T) {
	e := newEnv(t, withConfig(func(c *policy.Config) {
		c.Limits.ConnectionsPerSecond, c.Limits.Burst = 1e9, 1<<30
		c.Integrations[0].Widen = policy.WidenAuto
	}))
	e.resolveToOrigin("api.allowed.example", "evil.allowed.example")
	leakCheck(t, e)
	deadline := time.Now().Add(soakDuration())
	var up, down, allowed, denied atomic.Int64
	var wg sync.WaitGroup
	target := "api.allowed.example:" + itoa(e.origin.Addr.Port())
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for time.Now().Before(deadline) {
				if rng.IntN(3) == 0 {
					resp, err := e.sendConnect("evil.allowed.example:" + itoa(e.origin.Addr.Port())) // closes its socket
					if err != nil || resp.StatusCode != 403 {
						t.Errorf("denied host: %v %v", resp, err)
						return
					}
					denied.Add(1)
					continue
				}
				pc := e.pipelined(target)
				tc := tls.Client(pc, &tls.Config{ServerName: "api.allowed.example", RootCAs: e.ca.Pool})
				body := strings.Repeat("s", 1+rng.IntN(64<<10))
				req, _ := http.NewRequest("POST", "https://"+target+"/echo", strings.NewReader(body))
				req.Close = true
				if err := req.Write(tc); err != nil {
					t.Errorf("write: %v", err)
					return
				}
				resp, err := http.ReadResponse(bufio.NewReader(tc), req)
				if err != nil {
					t.Errorf("read: %v", err)
					return
				}
				got, _ := io.ReadAll(resp.Body)
				if len(got) != len(body) {
					t.Errorf("echo %d of %d bytes", len(got), len(body))
				}
				io.Copy(io.Discard, tc)
				tc.Close()
				up.Add(pc.up.Load())
				down.Add(pc.down.Load())
				allowed.Add(1)
			}
		}(w)
	}
	// Reloads throughout: a new version each time, toggling a host the
	// traffic does not use, so no tunnel is cut and the bytes stay exact.
	reloads := 0
	for v := 1; time.Now().Before(deadline); v++ {
		hosts := []string{"api.allowed.example"}
		if v%2 == 0 {
			hosts = append(hosts, "spare.allowed.example")
		}
		e.writeManifest(fmt.Sprintf("1.1.%d", v), hosts...)
		e.registry.Load(e.cfg)
		e.srv.Redecide()
		reloads++
		time.Sleep(50 * time.Millisecond) // the reload cadence, not a synchronisation
	}
	wg.Wait()
	waitFor(t, func() bool { return e.srv.OpenTunnels() == 0 })
	var loggedUp, loggedDown, closes int64
	for _, ev := range e.log.events(t) {
		if ev["event"] == "close" && ev["host"] == "api.allowed.example" {
			loggedUp += int64(ev["bytes_up"].(float64))
			loggedDown += int64(ev["bytes_down"].(float64))
			closes++
		}
	}
	t.Logf("soak %s: %d tunnels (%d B up, %d B down), %d denials, %d reloads", soakDuration(), allowed.Load(), up.Load(), down.Load(), denied.Load(), reloads)
	if closes != allowed.Load() || loggedUp != up.Load() || loggedDown != down.Load() {
		t.Fatalf("close events: %d tunnels, %d B up, %d B down; clients: %d tunnels, %d B up, %d B down",
			closes, loggedUp, loggedDown, allowed.Load(), up.Load(), down.Load())
	}
}
