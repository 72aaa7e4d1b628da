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
// inside), the most recently used last, and the token the integration
// wrote for each. An origin that stores a request's Authorization header
// and shows it back later (a request log, a "last request" endpoint) must
// find it scrubbed in every later answer, as a raw value is. It is the
// second layer: every answer is also scrubbed of each value's base64 at
// every alignment (encodedPairs), which needs no memory; this one gives
// the integration back exactly the token it wrote, edges included. It is
// safe for concurrent use.
type BuiltTokens struct {
	mu    sync.Mutex
	pairs []pair
}

// NewBuiltTokens returns an empty store; one serves an integration's
// brokered connections.
func NewBuiltTokens() *BuiltTokens { return &BuiltTokens{} }

// remember adds each echo, or moves it last if known, forgetting the
// least recently used past maxBuiltTokens. A nil store remembers nothing.
func (t *BuiltTokens) remember(echoes []pair) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range echoes {
		for i, p := range t.pairs {
			if bytes.Equal(p.from, e.from) {
				t.pairs = append(t.pairs[:i], t.pairs[i+1:]...)
				break
			}
		}
		t.pairs = append(t.pairs, e)
		if len(t.pairs) > maxBuiltTokens {
			t.pairs = append([]pair(nil), t.pairs[len(t.pairs)-maxBuiltTokens:]...)
		}
	}
}

// all is a copy of the pairs remembered (none in a nil store).
func (t *BuiltTokens) all() []pair {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]pair(nil), t.pairs...)
}
