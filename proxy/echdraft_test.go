package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"strconv"
	"testing"

	"github.com/egressd/egressd/policy"
)

// echCodePointsEverUsed are the extension code points Encrypted ClientHello
// and its predecessor ESNI were sent under: the final 0xfe0d, the range of
// draft-ietf-tls-esni's later drafts from 0xfe01 up, draft 07's 0xff02 and
// 0xff03, the legacy ESNI 0xffce, and 0xfd00 (ech_outer_extensions). A
// front end that still speaks a draft routes on the hidden name as the
// final one would. 0xff01 is renegotiation_info (RFC 5746), not ECH: Go's
// own client sends it, and it must pass.
var echCodePointsEverUsed = func() []uint16 {
	cps := []uint16{0xff02, 0xff03, 0xffce, 0xfd00}
	for cp := uint16(0xfe01); cp <= 0xfe0d; cp++ {
		cps = append(cps, cp)
	}
	return cps
}()

// TestClientHelloWithECHUnderADraftCodePointIsRefused is issue 18's break 5
// (f18b): 0xfe0d and 0xffce were refused, but ECH under 0xfe08, 0xfe09,
// 0xfe0a, 0xff02 or 0xfd00 passed the guard.
func TestClientHelloWithECHUnderADraftCodePointIsRefused(t *testing.T) {
	for _, cp := range echCodePointsEverUsed {
		t.Run("0x"+strconv.FormatUint(uint64(cp), 16), func(t *testing.T) {
			hello := buildHello(helloSpec{names: []string{"api.allowed.example"}, extra: []uint16{0x000a, cp}})
			_, _, err := ReadClientHello(bufio.NewReader(bytes.NewReader(hello)))
			var he *HelloError
			if !errors.As(err, &he) || he.Reason != policy.ECHPresent {
				t.Fatalf("got %v, want ech_present", err)
			}
		})
	}
	// Neighbours that are not ECH pass.
	for _, cp := range []uint16{0xfe00, 0xfe0e, 0xff00, 0xff01, 0xff04, 0xfd01} {
		hello := buildHello(helloSpec{names: []string{"api.allowed.example"}, extra: []uint16{cp}})
		if _, _, err := ReadClientHello(bufio.NewReader(bytes.NewReader(hello))); err != nil {
			t.Fatalf("0x%x refused: %v", cp, err)
		}
	}
}

// TestTunnelWithECHDraftCodePointIsRefusedEndToEnd sends, through the
// proxy, ClientHellos carrying ECH under draft code points: each tunnel is
// closed and logged ech_present.
func TestTunnelWithECHDraftCodePointIsRefusedEndToEnd(t *testing.T) {
	for _, cp := range []uint16{0xfe08, 0xfe09, 0xfe0a, 0xff02, 0xfd00} {
		t.Run("0x"+strconv.FormatUint(uint64(cp), 16), func(t *testing.T) {
			e := newEnv(t) // one each: a second refusal in the window would be folded
			e.resolveToOrigin("api.allowed.example")
			target := "api.allowed.example:" + itoa(e.origin.Addr.Port())
			hello := buildHello(helloSpec{names: []string{"api.allowed.example"}, extra: []uint16{cp}})
			if status, closed := e.rawTunnel(target, hello); status != 200 || !closed {
				t.Fatalf("status %d, closed %v", status, closed)
			}
			e.log.waitEvent(t, map[string]any{"event": "connect", "decision": "deny", "reason": "ech_present", "host": "api.allowed.example"})
		})
	}
}
