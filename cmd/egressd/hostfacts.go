package main

import (
	"errors"
	"net"
	"os"
	"strconv"
	"strings"

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

// hostFileMax is the host's fs.file-max, or 0 when it cannot be read.
func hostFileMax() int64 {
	data, err := os.ReadFile("/proc/sys/fs/file-max")
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}
