package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"testing"

	"github.com/egressd/egressd/policy"
	"golang.org/x/crypto/cryptobyte"
)

// helloSpec describes a hand-built ClientHello, for the shapes real
// clients never send.
type helloSpec struct {
	names    []string // server_name entries, host_name type
	nameType uint8    // overrides the entry type when non-zero
	extra    []uint16 // extra empty extensions, in order
	noSNI    bool
	splitAt  int // split the handshake across two records at this offset (0: one record)
	trailing []byte
	padding  []byte // a padding extension (RFC 7685) carrying these bytes
}

func buildHello(s helloSpec) []byte {
	var exts cryptobyte.Builder
	if !s.noSNI {
		exts.AddUint16(extServerName)
		exts.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
				for _, n := range s.names {
					b.AddUint8(s.nameType)
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(n)) })
				}
			})
		})
	}
	for _, e := range s.extra {
		exts.AddUint16(e)
		exts.AddUint16(0)
	}
	if s.padding != nil {
		exts.AddUint16(21)
		exts.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(s.padding) })
	}
	var body cryptobyte.Builder
	body.AddUint16(0x0303)
	body.AddBytes(make([]byte, 32))
	body.AddUint8(0)
	body.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint16(0x1301) })
	body.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint8(0) })
	body.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(exts.BytesOrPanic()) })
	var hs cryptobyte.Builder
	hs.AddUint8(handshakeTypeClientHello)
	hs.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(body.BytesOrPanic()) })
	msg := append(hs.BytesOrPanic(), s.trailing...)
	record := func(p []byte) []byte {
		return append([]byte{recordTypeHandshake, 3, 1, byte(len(p) >> 8), byte(len(p))}, p...)
	}
	if s.splitAt > 0 {
		return append(record(msg[:s.splitAt]), record(msg[s.splitAt:])...)
	}
	return record(msg)
}

func TestReadClientHello(t *testing.T) {
	cases := []struct {
		name   string
		raw    []byte
		sni    string
		reason policy.Reason
	}{
		{"one_host_name", buildHello(helloSpec{names: []string{"api.allowed.example"}}), "api.allowed.example", ""},
		{"upper_case_sni_canonicalised", buildHello(helloSpec{names: []string{"API.Allowed.Example"}}), "api.allowed.example", ""},
		{"reassembled_across_records", buildHello(helloSpec{names: []string{"api.allowed.example"}, splitAt: 3}), "api.allowed.example", ""},
		{"sni_missing", buildHello(helloSpec{noSNI: true, extra: []uint16{0x000a}}), "", policy.SNIMissing},
		{"sni_two_server_name_entries", buildHello(helloSpec{names: []string{"api.allowed.example", "evil.example"}}), "", policy.SNIMissing},
		{"sni_entry_not_host_name", buildHello(helloSpec{names: []string{"api.allowed.example"}, nameType: 1}), "", policy.SNIMissing},
		{"sni_trailing_dot", buildHello(helloSpec{names: []string{"api.allowed.example."}}), "", policy.SNIMismatch},
		{"sni_ip_literal", buildHello(helloSpec{names: []string{"127.0.0.1"}}), "", policy.SNIMismatch},
		{"ech_present", buildHello(helloSpec{names: []string{"api.allowed.example"}, extra: []uint16{extEncryptedClientHello}}), "", policy.ECHPresent},
		{"legacy_esni_present", buildHello(helloSpec{names: []string{"api.allowed.example"}, extra: []uint16{extLegacyESNI}}), "", policy.ECHPresent},
		{"duplicated_extension", buildHello(helloSpec{names: []string{"api.allowed.example"}, extra: []uint16{0x000a, 0x000a}}), "", policy.NotTLS},
		{"duplicated_server_name_extension", buildHello(helloSpec{names: []string{"api.allowed.example"}, extra: []uint16{extServerName}}), "", policy.NotTLS},
		{"plaintext_http", []byte("GET / HTTP/1.1\r\nHost: api.allowed.example\r\n\r\n"), "", policy.NotTLS},
		{"data_after_hello_in_record", buildHello(helloSpec{names: []string{"api.allowed.example"}, trailing: []byte{0}}), "", policy.NotTLS},
		{"oversized_record", []byte{recordTypeHandshake, 3, 1, 0x7f, 0xff}, "", policy.NotTLS},
		{"empty", nil, "", policy.NotTLS},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw, sni, err := ReadClientHello(bufio.NewReader(bytes.NewReader(tc.raw)))
			var he *HelloError
			switch {
			case tc.reason == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.reason == "" && (sni.String() != tc.sni || !bytes.Equal(raw, tc.raw)):
				t.Fatalf("sni %q raw %d/%d bytes", sni, len(raw), len(tc.raw))
			case tc.reason != "" && (!errors.As(err, &he) || he.Reason != tc.reason):
				t.Fatalf("got %v, want reason %s", err, tc.reason)
			}
		})
	}
}

// TestReadClientHelloFromCryptoTLS checks the parser against the ClientHello
// Go's own TLS client sends.
func TestReadClientHelloFromCryptoTLS(t *testing.T) {
	a, b := net.Pipe()
	go tls.Client(a, &tls.Config{ServerName: "api.allowed.example"}).Handshake()
	_, sni, err := ReadClientHello(bufio.NewReader(b))
	a.Close()
	b.Close()
	if err != nil || sni.String() != "api.allowed.example" {
		t.Fatalf("sni %q, %v", sni, err)
	}
}

// FuzzReadClientHello: no panic on any input, and an accepted hello's
// bytes are exactly what was read.
func FuzzReadClientHello(f *testing.F) {
	f.Add(buildHello(helloSpec{names: []string{"api.allowed.example"}}))
	f.Add(buildHello(helloSpec{names: []string{"a.example", "b.example"}}))
	f.Add(buildHello(helloSpec{names: []string{"a.example"}, extra: []uint16{extEncryptedClientHello}, splitAt: 7}))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, sni, err := ReadClientHello(bufio.NewReader(bytes.NewReader(data)))
		if err == nil && (sni.IsZero() || !bytes.HasPrefix(data, raw)) {
			t.Fatalf("accepted hello with sni %q, raw not a prefix", sni)
		}
	})
}

// maxHelloAllocs is what reading one ClientHello may allocate: the raw
// bytes kept for the replay, and nothing per record or per extension
// beyond them (the name's own string aside). Every CONNECT pays it.
const maxHelloAllocs = 2

// The ClientHello is read on every connection: one buffer for the bytes
// replayed to the origin, not a copy per record, per header and per
// reassembly, nor a map of extensions seen.
func TestReadingAClientHelloAllocatesOnlyItsReplayBuffer(t *testing.T) {
	for _, spec := range []helloSpec{
		{names: []string{"api.allowed.example"}, extra: []uint16{10, 11, 13, 16, 23, 43, 45, 51}},
		{names: []string{"api.allowed.example"}, splitAt: 40}, // two records: one reassembly more
	} {
		hello := buildHello(spec)
		r := bytes.NewReader(hello)
		br := bufio.NewReaderSize(r, 4096)
		allocs := testing.AllocsPerRun(200, func() {
			r.Reset(hello)
			br.Reset(r)
			if _, sni, err := ReadClientHello(br); err != nil || sni.String() != "api.allowed.example" {
				t.Fatalf("ReadClientHello: %v %v", sni, err)
			}
		})
		want := float64(maxHelloAllocs)
		records := 1.0
		if spec.splitAt != 0 {
			want += 2 // raw grows once more, and the handshake is reassembled
			records++
		}
		if raceEnabled {
			want += records // the race detector moves each record's header to the heap
		}
		if allocs > want {
			t.Errorf("split at %d: %.0f allocations per ClientHello, want at most %.0f", spec.splitAt, allocs, want)
		}
	}
}
