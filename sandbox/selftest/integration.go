package selftest

import (
	"io"
	"os"
	"path/filepath"
)

// probeManifest is the built-in probe integration: one allowed host, no
// declared variables, its program the egressd binary in probe mode.
const probeManifest = `{"schemaVersion":1,"id":"` + IntegrationID + `","version":"1.0.0",
"name":"egressd selftest","summary":"The escape battery: every probe must be refused.",
"runtime":{"kind":"local-mcp","command":"./egressd-selftest-probe","args":["` + ProbeArg + `"]},
"permissions":[{"kind":"network","domains":["api.egressd-selftest.example"]}]}
`

// WriteIntegration writes the probe integration into dir/integration: its
// manifest and a copy of binary, so the program runs from the integration
// folder like any integration's own. It returns the manifest's path and
// the program's.
func WriteIntegration(dir, binary string) (manifest, program string, err error) {
	integ := filepath.Join(dir, "integration")
	if err := os.Mkdir(integ, 0o755); err != nil {
		return "", "", err
	}
	manifest = filepath.Join(integ, "voiceos.integration.json")
	if err := os.WriteFile(manifest, []byte(probeManifest), 0o644); err != nil {
		return "", "", err
	}
	program = filepath.Join(integ, "egressd-selftest-probe")
	return manifest, program, copyFile(binary, program)
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
