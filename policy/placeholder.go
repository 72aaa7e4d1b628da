package policy

import (
	"bytes"
	"crypto/rand"
	"errors"
	"math/big"
	"strings"
)

const base62 = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// minGeneratedPlaceholder is the shortest placeholder NewPlaceholder makes:
// "egressd-ph-" and 21 base62 characters, about 125 random bits.
const minGeneratedPlaceholder = 32

// NewPlaceholder returns a fresh placeholder for value: PlaceholderPrefix
// and random base62 characters (crypto/rand), as long as the value when
// that is longer than 32, so a client that checks a key's length accepts
// it. It never contains the value nor the value it, and never equals any
// of taken (the placeholders already handed out in this run).
func NewPlaceholder(value []byte, taken []string) (string, error) {
	n := max(len(value), minGeneratedPlaceholder)
	if n > MaxSecretValue {
		return "", errors.New("the value is too long to broker")
	}
	for range 8 {
		var b strings.Builder
		b.WriteString(PlaceholderPrefix)
		for b.Len() < n {
			i, err := rand.Int(rand.Reader, big.NewInt(int64(len(base62))))
			if err != nil {
				return "", err
			}
			b.WriteByte(base62[i.Int64()])
		}
		p := b.String()
		if len(value) > 0 && (bytes.Contains(value, []byte(p)) || strings.Contains(p, string(value))) {
			continue
		}
		clash := false
		for _, t := range taken {
			clash = clash || strings.Contains(t, p) || strings.Contains(p, t)
		}
		if !clash {
			return p, nil
		}
	}
	return "", errors.New("no placeholder could be made apart from the value (is the value a piece of \"" + PlaceholderPrefix + "\"?)")
}
