package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"sync"
	"time"
)

// Leaf lifetimes. A leaf is short-lived so a copy taken from memory is of
// little use for long; it is renewed well before it expires, so a
// connection never starts with a certificate about to lapse.
const (
	leafLifetime = 24 * time.Hour
	leafSkew     = time.Hour // NotBefore is backdated for clients whose clock is behind
	leafRenew    = 6 * time.Hour
	// maxLeaves bounds the cache. Only names the operator bound a secret to
	// are ever brokered, but a wildcard binding matches many names, and a
	// hostile child chooses which of them it asks for.
	maxLeaves = 1024
)

// Leaves issues and caches, per DNS name, the leaf certificates a CA signs
// for brokered hosts. It is safe for concurrent use.
type Leaves struct {
	ca  *CA
	now func() time.Time

	mu    sync.Mutex
	cache map[string]*tls.Certificate
}

// NewLeaves returns an empty cache of leaves signed by ca.
func NewLeaves(ca *CA) *Leaves {
	return &Leaves{ca: ca, now: time.Now, cache: map[string]*tls.Certificate{}}
}

// Leaf returns a certificate for name, from the cache while it has more
// than leafRenew left, else freshly issued. A full cache is emptied rather
// than grown: issuing a leaf costs one ECDSA signature.
func (l *Leaves) Leaf(name string) (*tls.Certificate, error) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.cache[name]; ok && c.Leaf.NotAfter.Sub(now) > renewWithin(c) {
		return c, nil
	}
	c, err := l.ca.Leaf(name, now)
	if err != nil {
		return nil, err
	}
	if len(l.cache) >= maxLeaves {
		clear(l.cache)
	}
	l.cache[name] = c
	return c, nil
}

// renewWithin is how long before its end a leaf is replaced: leafRenew, or
// a quarter of its life when a short-lived CA cut it short.
func renewWithin(c *tls.Certificate) time.Duration {
	return min(leafRenew, c.Leaf.NotAfter.Sub(c.Leaf.NotBefore)/4)
}

// Leaf issues a certificate for the one DNS name, valid from an hour
// before now for leafLifetime, with a fresh ECDSA P-256 key.
func (c *CA) Leaf(name string, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("broker leaf: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(leafLifetime)
	if notAfter.After(c.cert.NotAfter) {
		notAfter = c.cert.NotAfter // a leaf cannot outlive its CA
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    now.Add(-leafSkew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, key.Public(), c.key)
	if err != nil {
		return nil, fmt.Errorf("broker leaf: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("broker leaf: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{der, c.cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}
