package main

import (
	"errors"
	"net"

	"github.com/miekg/dns"
)

// systemResolvers reads the nameservers from /etc/resolv.conf.
func systemResolvers() ([]string, error) {
	cc, err := dns.ClientConfigFromFile("/etc/resolv.conf")
	if err != nil || len(cc.Servers) == 0 {
		return nil, errors.New("no DNS servers in /etc/resolv.conf; pass --resolver ADDR")
	}
	var out []string
	for _, s := range cc.Servers {
		out = append(out, net.JoinHostPort(s, cc.Port))
	}
	return out, nil
}
