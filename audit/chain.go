package audit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strconv"
)

// chain links lines: each line carries seq, the previous line's hash, and
// its own hash over its exact bytes up to and including "prev". The hash is
// SHA-256, or HMAC-SHA-256 when the operator supplies a key.
//
// A line is   {…fields…,"seq":N,"prev":"P","hash":"H"}\n
// and H = Hash({…fields…,"seq":N,"prev":"P")   — the bytes as written.
type chain struct {
	key  []byte
	seq  uint64 // seq of the last line written
	prev string // hash of the last line written

	// Kept between lines, so sealing one allocates nothing: the hasher
	// (reset each time), its digest, and the sealed line, valid until the
	// next seal. The Log's mutex serialises every use.
	h   hash.Hash
	sum [sha256.Size]byte
	out []byte
}

func newChain(key []byte, prev string) chain { return chain{key: key, prev: prev} }

func (c *chain) hasher() hash.Hash {
	if c.key != nil {
		return hmac.New(sha256.New, c.key)
	}
	return sha256.New()
}

// seal turns one zerolog line ({…}\n) into a chained line. It does not
// advance the chain: that happens only once the line is written. The line
// returned is the chain's buffer, overwritten by the next seal.
func (c *chain) seal(line []byte) []byte {
	body := line[:len(line)-2] // drop "}\n"
	out := append(c.out[:0], body...)
	out = append(out, `,"seq":`...)
	out = strconv.AppendUint(out, c.seq+1, 10)
	out = append(out, `,"prev":"`...)
	out = append(out, c.prev...)
	out = append(out, '"')
	if c.h == nil {
		c.h = c.hasher()
	}
	c.h.Reset()
	c.h.Write(out)
	out = append(out, `,"hash":"`...)
	out = hex.AppendEncode(out, c.h.Sum(c.sum[:0]))
	out = append(out, "\"}\n"...)
	c.out = out
	return out
}

// advance records a written line as the chain's new head.
func (c *chain) advance(line []byte) {
	c.seq++
	// The hash is the 64 hex digits before the closing "}\n.
	c.prev = string(line[len(line)-3-64 : len(line)-3])
}
