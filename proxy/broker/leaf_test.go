package broker

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestLeafNamesOneHostIsShortLivedAndChainsToTheCA(t *testing.T) {
	ca, err := NewEphemeralCA(48 * time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	l := NewLeaves(ca)
	c, err := l.Leaf("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(ca.CertPEM())
	root, _ := x509.ParseCertificate(block.Bytes)
	pool := x509.NewCertPool()
	pool.AddCert(root)
	if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: "api.example.com", Roots: pool}); err != nil {
		t.Fatalf("leaf does not verify for its name: %v", err)
	}
	if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: "evil.example.com", Roots: pool}); err == nil {
		t.Fatal("leaf verifies for another name")
	}
	if len(c.Leaf.DNSNames) != 1 || c.Leaf.IsCA {
		t.Fatalf("leaf SANs %v, CA %v: want one name, not a CA", c.Leaf.DNSNames, c.Leaf.IsCA)
	}
	if life := c.Leaf.NotAfter.Sub(c.Leaf.NotBefore); life > leafLifetime+leafSkew {
		t.Fatalf("leaf lives %v", life)
	}
}

func TestLeafIsCachedThenRenewedBeforeItExpires(t *testing.T) {
	ca, _ := NewEphemeralCA(72 * time.Hour)
	l := NewLeaves(ca)
	now := time.Now()
	l.now = func() time.Time { return now }
	a, _ := l.Leaf("a.example")
	if b, _ := l.Leaf("a.example"); b != a {
		t.Fatal("the same name issued a second leaf while the first is fresh")
	}
	now = now.Add(leafLifetime - leafRenew + time.Minute)
	if b, _ := l.Leaf("a.example"); b == a {
		t.Fatal("a leaf close to expiry was served again")
	}
}

func TestLeafCacheStaysBoundedWhenAChildAsksForManyNames(t *testing.T) {
	ca, _ := NewEphemeralCA(time.Hour)
	l := NewLeaves(ca)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < maxLeaves/2+10; i++ {
				if _, err := l.Leaf(fmt.Sprintf("n%d-%d.wild.example", g, i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.cache) > maxLeaves {
		t.Fatalf("cache holds %d leaves, bound %d", len(l.cache), maxLeaves)
	}
}

func TestLeafNeverOutlivesItsCA(t *testing.T) {
	ca, _ := NewEphemeralCA(time.Hour)
	c, err := NewLeaves(ca).Leaf("a.example")
	if err != nil {
		t.Fatal(err)
	}
	if c.Leaf.NotAfter.After(ca.cert.NotAfter) {
		t.Fatalf("leaf until %v, CA until %v", c.Leaf.NotAfter, ca.cert.NotAfter)
	}
}
