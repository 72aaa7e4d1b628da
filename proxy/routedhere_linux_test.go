package proxy

import (
	"net/netip"
	"testing"
)

// TestRoutedHereKnowsLoopbackIsThisHost: the kernel's answer for the
// loopback addresses is a local route.
func TestRoutedHereKnowsLoopbackIsThisHost(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "127.0.0.2", "::ffff:127.0.0.1"} {
		here, err := routedHere(netip.MustParseAddr(a))
		if err != nil || !here {
			t.Fatalf("routedHere(%s) = %v, %v", a, here, err)
		}
	}
}

// BenchmarkRoutedHere is what the pre-dial route check costs a CONNECT,
// per address.
func BenchmarkRoutedHere(b *testing.B) {
	a := netip.MustParseAddr("192.0.2.1")
	for b.Loop() {
		routedHere(a)
	}
}
