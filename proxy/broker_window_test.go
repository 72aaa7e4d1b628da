package proxy

import (
	"io"
	"testing"

	"golang.org/x/net/http2"
)

// TestBrokeredHTTP2ConnectionsOfferSmallReceiveWindows: the decrypting
// HTTP/2 server kept Go's default 1 MiB receive buffer per connection, so a
// program that sent bodies the origin never read, kept alive with PINGs,
// parked about 2.2 MiB in egressd per brokered connection (300 of them:
// 25 → 709 MiB; round 22 broker attacker). The windows egressd offers the
// program are read here from its own SETTINGS and WINDOW_UPDATE frames.
func TestBrokeredHTTP2ConnectionsOfferSmallReceiveWindows(t *testing.T) {
	b := newBrokerEnv(t, true, nil)
	tc, _ := b.brokeredTLS(t, "h2")
	defer tc.Close()
	if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(tc, tc)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// The server's SETTINGS come first, then (if it widens it) its
	// connection WINDOW_UPDATE, then its ACK of ours: read until that ACK.
	stream, conn := uint32(65535), uint32(65535) // the protocol's initial windows
	for acked := false; !acked; {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				acked = true
				continue
			}
			if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
				stream = v
			}
			fr.WriteSettingsAck()
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				conn += f.Increment
			}
		}
	}
	if stream > maxBrokeredStreamWindow || conn > maxBrokeredConnWindow {
		t.Fatalf("egressd offers a %d-byte stream window and a %d-byte connection window, want at most %d and %d", stream, conn, maxBrokeredStreamWindow, maxBrokeredConnWindow)
	}
}

// The windows the test allows: a quarter of Go's defaults.
const (
	maxBrokeredStreamWindow = 64 << 10
	maxBrokeredConnWindow   = 256 << 10
)
