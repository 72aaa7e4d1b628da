package policy

import "github.com/egressd/egressd/allowlist"

// Secret is one credential the operator bound to hosts (issue 15): inside
// the integration its environment variable holds Placeholder; egressd puts
// Value in its place only in requests to a bound host, over TLS egressd
// verified itself. Value never appears in a log, an error or the sandbox.
type Secret struct {
	Name        string            // the environment variable, as the manifest declares it
	Hosts       []allowlist.Entry // exact names or one-label wildcards, each allowed by the manifest
	Placeholder string            // what the integration sees, e.g. "egressd-ph-…"
	Value       []byte            // the real credential
}

// BoundTo reports whether the secret may be sent to host.
func (s Secret) BoundTo(host allowlist.Name) bool {
	for _, e := range s.Hosts {
		if e.Matches(host) {
			return true
		}
	}
	return false
}

// SecretsFor returns the secrets bound to host, in binding order; none means
// a connection to host is spliced end to end and never decrypted.
func (p *Policy) SecretsFor(host allowlist.Name) []Secret {
	var out []Secret
	for _, s := range p.secrets {
		if s.BoundTo(host) {
			out = append(out, s)
		}
	}
	return out
}

// Secrets returns every bound secret, for a connection that must refuse a
// placeholder sent to a host it is not bound to.
func (p *Policy) Secrets() []Secret { return p.secrets }
