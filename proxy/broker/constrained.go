package broker

import (
	"crypto/x509"
	"errors"
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
	return newEphemeralCA(lifetime, func(tmpl *x509.Certificate) {
		tmpl.PermittedDNSDomainsCritical = true
		tmpl.PermittedDNSDomains = permitted
		tmpl.ExcludedIPRanges = []*net.IPNet{{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, {IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}}
	})
}
