package broker

import (
	"crypto/sha256"
	"net/http"
	"sync"

	"github.com/egressd/egressd/policy"
)

// cleanFields remembers the header fields (a name and all its values, in
// order) this connection's requests carried and the head checks found
// clean, under the secrets of the time: HTTP/2's header compression lets a
// program send the same large field in every request for a few bytes each
// (round 49: 68 bytes a request for a 45 KiB head, read by every check),
// and a field read once is not read again. A field that differs in any
// byte, or any change of the secrets bound, is read anew.
type cleanFields struct {
	mu   sync.Mutex
	seen map[[sha256.Size]byte]bool
}

// maxCleanFields bounds what a connection remembers; past it, it forgets.
const maxCleanFields = 1024

// fieldKeys are the digests of h's fields, each under secrets (a digest of
// what the checks look for).
func fieldKeys(h http.Header, secrets []byte) map[string][sha256.Size]byte {
	keys := make(map[string][sha256.Size]byte, len(h))
	for name, values := range h {
		d := sha256.New()
		d.Write(secrets)
		d.Write([]byte(name))
		for _, v := range values {
			d.Write([]byte{0})
			d.Write([]byte(v))
		}
		var k [sha256.Size]byte
		d.Sum(k[:0])
		keys[name] = k
	}
	return keys
}

// unseen is h without the fields known clean.
func (c *cleanFields) unseen(h http.Header, keys map[string][sha256.Size]byte) http.Header {
	c.mu.Lock()
	defer c.mu.Unlock()
	fresh := make(http.Header, len(h))
	for name, values := range h {
		if !c.seen[keys[name]] {
			fresh[name] = values
		}
	}
	return fresh
}

// remember notes the fields of keys as clean.
func (c *cleanFields) remember(keys map[string][sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil || len(c.seen)+len(keys) > maxCleanFields {
		c.seen = make(map[[sha256.Size]byte]bool, len(keys))
	}
	for _, k := range keys {
		c.seen[k] = true
	}
}

// secretsDigest is what the head checks look for, as one digest: the value
// forms (guess) and the unbound placeholders (misdirection).
func secretsDigest(forms []valueForm, unbound []policy.Secret) []byte {
	d := sha256.New()
	for _, f := range forms {
		d.Write([]byte(f.name))
		d.Write([]byte{0})
		d.Write(f.form)
		d.Write([]byte{0})
	}
	for _, sec := range unbound {
		d.Write([]byte(sec.Placeholder))
		d.Write([]byte{0})
	}
	return d.Sum(nil)
}
