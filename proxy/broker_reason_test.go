package proxy

import (
	"bufio"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestBrokerOriginEchoingTheValueInA101ReasonPhraseDoesNotHandItBack: the
// origin answers an upgrade with a 101 whose reason phrase is the
// Authorization header it received (the real value) and a Basic token
// egressd built. ReverseProxy writes a 101's status line as the origin
// sent it; the program must read the standard one instead.
func TestBrokerOriginEchoingTheValueInA101ReasonPhraseDoesNotHandItBack(t *testing.T) {
	b := newBrokerEnv(t, false, func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "HTTP/1.1 101 "+r.Header.Get("Authorization")+" "+r.Header.Get("X-B")+"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.ReadString('\n')
	})
	tc, target := b.brokeredTLS(t, "http/1.1")
	defer tc.Close()
	basic := base64.StdEncoding.EncodeToString([]byte("u:" + tokenPH))
	io.WriteString(tc, "GET /ws HTTP/1.1\r\nHost: "+target+"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nAuthorization: Bearer "+tokenPH+"\r\nX-B: Basic "+basic+"\r\n\r\n")
	line, err := bufio.NewReader(tc).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if reqs := b.origin.requests(); len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "Bearer "+tokenValue {
		t.Fatalf("the origin did not receive the value: %v", reqs)
	}
	noValueIn(t, "the status line", line)
	if built := base64.StdEncoding.EncodeToString([]byte("u:" + tokenValue)); strings.Contains(line, built) {
		t.Fatalf("the status line holds the Basic token egressd built: %q", line)
	}
	if line != "HTTP/1.1 101 Switching Protocols\r\n" {
		t.Fatalf("status line %q, want the standard one", line)
	}
}
