package broker

import (
	"bytes"
	"sync"
)

// maxBuiltTokens bounds the Basic tokens a BuiltTokens remembers, and so
// the pairs every response is searched for beyond the secrets' values.
const maxBuiltTokens = 16

// maxBasicPerRequest bounds the Basic credentials carrying a placeholder in
// one request: each is a token egressd builds and then searches every
// response for, so their number multiplies the scrubber's work (6000 of
// them, in repeated User-Agent lines, made a 1 MB answer cost 15 s of CPU).
const maxBasicPerRequest = 4

// BuiltTokens remembers the Basic tokens egressd built (each with a value
// inside), the most recently used last, the host each was sent to, and the
// token the integration wrote for each. An origin that stores a request's
// Authorization header and shows it back later (a request log, a "last
// request" endpoint) must find it scrubbed in every later answer, as a raw
// value is. It is the second layer: every answer is also scrubbed of each
// value's base64 at every alignment (encodedPairs), which needs no memory;
// this one gives the integration back exactly the token it wrote, edges
// included. It is safe for concurrent use.
//
// A token is searched for only in the answers of the host it was sent to:
// searched in every host's answers, a token built for one host (whose last
// bytes the integration chose) was a pattern the integration could lay
// over a value another host echoed (round 24).
type BuiltTokens struct {
	mu     sync.Mutex
	tokens []builtToken
}

type builtToken struct {
	host string
	pair
}

// NewBuiltTokens returns an empty store; one serves an integration's
// brokered connections.
func NewBuiltTokens() *BuiltTokens { return &BuiltTokens{} }

// remember adds each echo sent to host, or moves it last if known,
// forgetting the least recently used past maxBuiltTokens (for all hosts
// together). A nil store remembers nothing.
func (t *BuiltTokens) remember(host string, echoes []pair) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range echoes {
		for i, k := range t.tokens {
			if k.host == host && bytes.Equal(k.from, e.from) {
				t.tokens = append(t.tokens[:i], t.tokens[i+1:]...)
				break
			}
		}
		t.tokens = append(t.tokens, builtToken{host: host, pair: e})
		if len(t.tokens) > maxBuiltTokens {
			t.tokens = append([]builtToken(nil), t.tokens[len(t.tokens)-maxBuiltTokens:]...)
		}
	}
}

// all is a copy of the pairs remembered for host (none in a nil store).
func (t *BuiltTokens) all(host string) []pair {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []pair
	for _, k := range t.tokens {
		if k.host == host {
			out = append(out, k.pair)
		}
	}
	return out
}
