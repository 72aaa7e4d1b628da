package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/internal/safefile"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy"
	"github.com/egressd/egressd/proxy/broker"
	"github.com/egressd/egressd/sandbox"
)

// ephemeralCALifetime outlasts any run a person starts; the CA lives in
// this process's memory only and dies with it.
const ephemeralCALifetime = 7 * 24 * time.Hour

// secretSpecs reads each --secret NAME=HOST[,HOST…]: the value from the
// launcher's environment, a fresh placeholder per run. The binding itself
// is validated by the policy, on load, against the manifest in force.
func secretSpecs(flags []string, environ func(string) (string, bool)) ([]policy.SecretSpec, error) {
	var out []policy.SecretSpec
	var taken []string
	for _, f := range flags {
		name, hosts, ok := strings.Cut(f, "=")
		at := "--secret " + name
		if !ok || name == "" || hosts == "" {
			return nil, fmt.Errorf("--secret %s: must be NAME=HOST[,HOST…]", f)
		}
		value, set := environ(name)
		if !set || value == "" {
			return nil, fmt.Errorf("%s: %s is not set in egressd's environment: the value is read from there", at, name)
		}
		ph, err := policy.NewPlaceholder([]byte(value), taken)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		taken = append(taken, ph)
		out = append(out, policy.SecretSpec{At: at, Name: name, Hosts: strings.Split(hosts, ","), Placeholder: ph,
			Value: []byte(value), From: "egressd's environment"})
	}
	return out, nil
}

// upstreamRoots is the system roots plus the PEM certificates in file, or
// nil (the system roots) when file is "".
func upstreamRoots(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	data, err := safefile.ReadRegular(file, 4<<20)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s: holds no PEM certificate", file)
	}
	return pool, nil
}

// brokerForRun makes the run's broker: an ephemeral CA name-constrained to
// the bound hosts, and the sandbox's trust bundle (the host's roots and
// that CA) in a file of its own. remove deletes the file.
func brokerForRun(secrets []policy.Secret, upstreamCA string) (b *proxy.BrokerOptions, bundle string, remove func(), err error) {
	var hosts []string
	for _, s := range secrets {
		for _, h := range s.Hosts {
			hosts = append(hosts, h.String())
		}
	}
	ca, err := broker.NewEphemeralCAFor(ephemeralCALifetime, hosts)
	if err != nil {
		return nil, "", nil, err
	}
	roots, err := upstreamRoots(upstreamCA)
	if err != nil {
		return nil, "", nil, fmt.Errorf("--upstream-ca: %w", err)
	}
	host := sandbox.HostTrustBundle()
	f, err := os.CreateTemp("", "egressd-trust-*.crt")
	if err != nil {
		return nil, "", nil, err
	}
	remove = func() { os.Remove(f.Name()) }
	content := append(append(host, '\n'), ca.CertPEM()...)
	if _, err := f.Write(content); err != nil {
		f.Close()
		remove()
		return nil, "", nil, err
	}
	if err := errors.Join(f.Chmod(0o644), f.Close()); err != nil { // certificates only: the sandbox's user reads it
		remove()
		return nil, "", nil, err
	}
	return &proxy.BrokerOptions{CA: ca, UpstreamRoots: roots}, f.Name(), remove, nil
}

// placeholderEnv lists NAME=PLACEHOLDER for each bound secret.
func placeholderEnv(secrets []policy.Secret) (names, env []string) {
	for _, s := range secrets {
		names = append(names, s.Name)
		env = append(env, s.Name+"="+s.Placeholder)
	}
	return names, env
}

// secretValues maps each bound secret's NAME to its value, for
// sandbox.WithoutSecrets; it never leaves egressd.
func secretValues(secrets []policy.Secret) map[string]string {
	m := map[string]string{}
	for _, s := range secrets {
		m[s.Name] = string(s.Value)
	}
	return m
}

// announceSecrets records each binding at start, by NAME and hosts: the
// value is never written anywhere, the placeholder only in the sandbox.
func announceSecrets(log *audit.Log, p *policy.Policy) {
	for _, s := range p.Secrets() {
		var hosts []string
		for _, h := range s.Hosts {
			hosts = append(hosts, h.String())
		}
		log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "secret_bound", Msg: s.Name + ": " + strings.Join(hosts, ",")}))
	}
}
