package policy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/egressd/egressd/internal/safefile"
)

// fileSecret is integrations[].secrets[]: one credential bound to hosts.
type fileSecret struct {
	Env         string   `yaml:"env"`
	Hosts       []string `yaml:"hosts"`
	ValueFile   string   `yaml:"value_file"`
	Placeholder string   `yaml:"placeholder"`
}

// fileTLS is tls: the broker's CA (the app containers trust it) and the
// extra roots origins are verified with.
type fileTLS struct {
	CACert     string `yaml:"ca_cert"`
	CAKey      string `yaml:"ca_key"`
	UpstreamCA string `yaml:"upstream_ca"`
}

// TLSFiles are the tls: paths. The CA is read once, at start: changing
// them takes a restart.
type TLSFiles struct {
	CACert, CAKey, UpstreamCA string
}

func (t TLSFiles) relativeTo(dir string) TLSFiles {
	for _, p := range []*string{&t.CACert, &t.CAKey, &t.UpstreamCA} {
		*p = os.ExpandEnv(*p) // $CREDENTIALS_DIRECTORY under LoadCredential=
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	return t
}

// SecretValueFileMax bounds a value_file; a value is at most MaxSecretValue
// bytes, and a larger file is a mistake.
const SecretValueFileMax = MaxSecretValue + 2

func parseSecrets(at string, fs []fileSecret, ps *problems) []SecretSpec {
	var out []SecretSpec
	for i, f := range fs {
		here := fmt.Sprintf("%s[%d]", at, i)
		if f.Env == "" {
			ps.add(here+".env", "is required: the variable the manifest declares for this secret")
		}
		if len(f.Hosts) == 0 {
			ps.add(here+".hosts", "is required: the hosts the secret may be sent to")
		}
		if f.ValueFile == "" {
			ps.add(here+".value_file", "is required: the file holding the secret (e.g. $CREDENTIALS_DIRECTORY/NAME)")
		}
		if msg := PlaceholderProblem(f.Placeholder); msg != "" {
			ps.add(here+".placeholder", msg)
		}
		out = append(out, SecretSpec{At: here + " (" + f.Env + ")", Name: f.Env, Hosts: f.Hosts, Placeholder: f.Placeholder, From: f.ValueFile})
	}
	return out
}

func parseTLS(f fileTLS, ins []Integration, ps *problems) TLSFiles {
	t := TLSFiles{CACert: f.CACert, CAKey: f.CAKey, UpstreamCA: f.UpstreamCA}
	if (t.CACert == "") != (t.CAKey == "") {
		ps.add("tls", "ca_cert and ca_key go together: the CA's certificate and its private key")
	}
	if t.UpstreamCA != "" && t.CACert == "" {
		ps.add("tls.upstream_ca", "verifies the hosts a secret is bound to, which needs tls.ca_cert and tls.ca_key")
	}
	for i, in := range ins {
		if len(in.Secrets) > 0 && t.CACert == "" {
			ps.add(fmt.Sprintf("integrations[%d].secrets", i), "a bound secret needs tls.ca_cert and tls.ca_key: egressd presents certificates for the bound hosts from that CA")
			break
		}
	}
	return t
}

// readSecretValues reads each value_file ($VARS expanded, relative to the
// config's folder), one trailing line break trimmed. It runs on every load,
// so a rotated file applies at the next reload. A problem names the file,
// never its content.
func readSecretValues(at string, specs []SecretSpec, dir string, ps *problems) {
	for i := range specs {
		sp := &specs[i]
		path := os.ExpandEnv(sp.From)
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		sp.From = path
		data, err := safefile.ReadRegular(path, SecretValueFileMax)
		if err != nil {
			ps.add(fmt.Sprintf("%s[%d].value_file", at, i), err.Error())
			continue
		}
		data = bytes.TrimSuffix(data, []byte("\n"))
		sp.Value = bytes.TrimSuffix(data, []byte("\r"))
	}
}
