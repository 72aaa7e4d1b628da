//go:build egressd_testhooks

package selftest

import (
	"encoding/json"
	"os"
)

// TestTargets reads EGRESSD_TESTHOOK_SELFTEST_TARGETS, so tests send only
// to documentation addresses. It exists only in binaries built with the
// egressd_testhooks tag, which no release is.
// With "beacon_resolver", the DNS probes ask the outer's DNS beacon
// instead of the host's resolver, so an unsandboxed run asks nothing real.
func TestTargets() (t Targets, hostDNS []string, beaconResolver, ok bool) {
	var o struct {
		Targets        Targets  `json:"targets"`
		HostDNS        []string `json:"host_dns"`
		BeaconResolver bool     `json:"beacon_resolver"`
	}
	v := os.Getenv("EGRESSD_TESTHOOK_SELFTEST_TARGETS")
	if v == "" || json.Unmarshal([]byte(v), &o) != nil {
		return Targets{}, nil, false, false
	}
	return o.Targets, o.HostDNS, o.BeaconResolver, true
}
