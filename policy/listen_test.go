package policy

import (
	"strings"
	"testing"
)

// TestListenProblemRefusesEveryWayToNameEveryInterface: a proxy on every
// interface serves anyone on the network under the integration's identity.
// Each spelling of "every interface" is refused, and the loopback and
// specific addresses on either side of it are not.
func TestListenProblemRefusesEveryWayToNameEveryInterface(t *testing.T) {
	cases := []struct {
		name, listen string
		refused      bool
	}{
		{"ipv4_unspecified", "0.0.0.0:3128", true},
		{"ipv6_unspecified", "[::]:3128", true},
		{"ipv6_unspecified_long_form", "[0:0:0:0:0:0:0:0]:3128", true},
		{"v4_mapped_unspecified_binds_ipv4_any", "[::ffff:0.0.0.0]:3128", true},
		{"unspecified_with_a_zone", "[::%lo]:3128", true},
		{"host_left_out_means_every_interface", ":3128", true},
		{"bare_ipv6_unspecified_without_port", "::", true},
		{"a_name_is_resolved_at_listen_time", "localhost:3128", true},
		{"ipv4_loopback", "127.0.0.1:3128", false},
		{"ipv4_loopback_port_zero", "127.0.0.1:0", false},
		{"ipv6_loopback", "[::1]:3128", false},
		{"one_specific_address", "192.0.2.10:3128", false},
		{"unix_socket", "unix:/run/egressd/a.sock", false},
		{"relative_unix_socket", "unix:a.sock", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := ListenProblem(tc.listen)
			if (msg != "") != tc.refused {
				t.Fatalf("ListenProblem(%q) = %q, want refused=%v", tc.listen, msg, tc.refused)
			}
			if tc.refused && !strings.Contains(msg, tc.listen) {
				t.Fatalf("message does not quote the address: %q", msg)
			}
		})
	}
}
