package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// NewEphemeralCAFor is NewEphemeralCA name-constrained (RFC 5280 4.2.1.10)
// to the bound hosts: "api.x.example" permits that name (and, as the
// constraint's semantics go, names below it), "*.cdn.x.example" the names
// below cdn.x.example; no IP address is permitted. The sandbox trusts this
// CA for every name it could reach, so a leaf for any other name, however
// it were obtained, does not verify.
func NewEphemeralCAFor(lifetime time.Duration, hosts []string) (*CA, error) {
	if len(hosts) == 0 {
		return nil, errors.New("broker CA: no host to constrain to")
	}
	var permitted []string
	for _, h := range hosts {
		if base, ok := strings.CutPrefix(h, "*."); ok {
			permitted = append(permitted, "."+base)
		} else {
			permitted = append(permitted, h)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("broker CA: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:                serial,
		Subject:                     pkix.Name{CommonName: "egressd ephemeral broker CA", Organization: []string{"egressd"}},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(lifetime),
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLen:                  0,
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         permitted,
		ExcludedIPRanges:            []*net.IPNet{{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, {IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("broker CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("broker CA: %w", err)
	}
	return &CA{cert: cert, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}, nil
}
