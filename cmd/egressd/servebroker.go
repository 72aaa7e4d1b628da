package main

import (
	"fmt"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/internal/safefile"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy"
	"github.com/egressd/egressd/proxy/broker"
)

// maxPEMFile bounds a CA certificate, key or roots file.
const maxPEMFile = 4 << 20

// loadBroker reads tls: for "egressd serve": the operator's CA (it must be
// a CA and match its key) and the extra roots origins are verified with.
// No CA configured means no broker: a bound host is then refused. Errors
// name the key and the file, never a key's content.
func loadBroker(t policy.TLSFiles) (*proxy.BrokerOptions, error) {
	if t.CACert == "" {
		return nil, nil
	}
	certPEM, err := safefile.ReadRegular(t.CACert, maxPEMFile)
	if err != nil {
		return nil, fmt.Errorf("tls.ca_cert: %w", err)
	}
	keyPEM, err := safefile.ReadRegular(t.CAKey, maxPEMFile)
	if err != nil {
		return nil, fmt.Errorf("tls.ca_key: %w", err)
	}
	ca, err := broker.LoadCA(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tls.ca_cert, tls.ca_key (%s, %s): %w", t.CACert, t.CAKey, err)
	}
	roots, err := upstreamRoots(t.UpstreamCA)
	if err != nil {
		return nil, fmt.Errorf("tls.upstream_ca: %w", err)
	}
	return &proxy.BrokerOptions{CA: ca, UpstreamRoots: roots}, nil
}

// tlsFixedAtStart wraps a daemon's config loader: tls: is read at start
// only, so a reload that changes it says that a restart is needed (the
// rest of the config still applies).
func tlsFixedAtStart(load func() (policy.Config, error), atStart policy.TLSFiles, warn func(string), log *audit.Log) func() (policy.Config, error) {
	return func() (policy.Config, error) {
		cfg, err := load()
		if err == nil && cfg.TLS != atStart {
			msg := "tls: changed; the broker's CA and upstream roots are read at start: restart egressd to apply the change (the ones read at start stay in force)"
			log.Write(audit.Event{Kind: audit.Policy, Action: "restart_needed", Msg: msg})
			warn(msg)
		}
		return cfg, err
	}
}
