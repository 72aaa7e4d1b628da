package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"
)

// signLeafDirectly issues a leaf from ca directly, as anything holding the key
// could: the name constraint must stop what egressd itself would never
// issue.
func signLeafDirectly(t *testing.T, ca *CA, dns string, ip net.IP) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dns},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if dns != "" {
		tmpl.DNSNames = []string{dns}
	}
	if ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

func TestEphemeralCALeafForAnUnboundNameDoesNotVerify(t *testing.T) {
	ca, err := NewEphemeralCAFor(time.Hour, []string{"api.acme.example", "*.cdn.acme.example"})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	for _, tc := range []struct {
		name string
		ip   net.IP
		ok   bool
	}{
		{"api.acme.example", nil, true},
		{"eu.cdn.acme.example", nil, true},
		{"evil.example", nil, false},
		{"acme.example", nil, false},
		{"cdn.acme.example", nil, false},
		{"", net.ParseIP("192.0.2.1"), false},
	} {
		leaf := signLeafDirectly(t, ca, tc.name, tc.ip)
		verify := tc.name
		if tc.ip != nil {
			verify = tc.ip.String()
		}
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: verify})
		if (err == nil) != tc.ok {
			t.Errorf("leaf for %s: verify err = %v, want ok %v", verify, err, tc.ok)
		}
	}
}
