package broker

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// CA issues the leaf certificates egressd presents for brokered hosts.
// For `run` it is ephemeral: generated per process and held in memory only.
// For `serve` the operator supplies it (tls.ca_cert, tls.ca_key).
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     crypto.Signer
}

// NewEphemeralCA generates a fresh CA valid for lifetime (plus an hour of
// clock skew before now). Its key never leaves the process.
func NewEphemeralCA(lifetime time.Duration) (*CA, error) {
	return newEphemeralCA(lifetime, nil)
}

// newEphemeralCA makes a CA with the fields every egressd CA has, then lets
// constraints (nil: none) narrow what it may sign.
func newEphemeralCA(lifetime time.Duration, constraints func(*x509.Certificate)) (*CA, error) {
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
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "egressd ephemeral broker CA", Organization: []string{"egressd"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	if constraints != nil {
		constraints(tmpl)
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

// LoadCA reads an operator's CA from PEM: the certificate must be a CA
// certificate and the key must be its private key.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("broker CA: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("broker CA: %w", err)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("broker CA: the certificate is not a CA certificate (basicConstraints CA:TRUE and keyUsage keyCertSign are required)")
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("broker CA: the key cannot sign")
	}
	block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	return &CA{cert: cert, certPEM: block, key: signer}, nil
}

// CertPEM returns the CA certificate, for the trust store of whoever must
// accept egressd's leaf certificates (the sandbox, an app container).
func (c *CA) CertPEM() []byte { return append([]byte(nil), c.certPEM...) }

func randomSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("broker: serial: %w", err)
	}
	return serial, nil
}
