package broker

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

func TestEphemeralCAIsACAAndLoadsBack(t *testing.T) {
	ca, err := NewEphemeralCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(ca.CertPEM())
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !cert.IsCA {
		t.Fatalf("not a CA certificate: %v", err)
	}
	if _, err := LoadCA(ca.CertPEM(), ca.CertPEM()); err == nil {
		t.Fatal("a certificate given as its own key was accepted")
	}
}
