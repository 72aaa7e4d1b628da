package proxy

import (
	"bufio"
	"errors"
	"io"
	"slices"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
	"golang.org/x/crypto/cryptobyte"
)

// maxHelloBytes bounds the ClientHello reassembled across records. Real
// ones are under 2 KiB; post-quantum key shares take them to about 1.8 KiB
// more. 16 KiB is one full TLS record.
const maxHelloBytes = 16 << 10

// TLS extension code points egressd looks at.
const (
	extServerName            = 0x0000
	extEncryptedClientHello  = 0xfe0d
	extLegacyESNI            = 0xffce
	extECHDraftFirst         = 0xfe01 // draft-ietf-tls-esni-08 and later drafts, up to 0xfe0d
	extECHDraft07            = 0xff02 // draft-ietf-tls-esni-07's encrypted_client_hello; 0xff03 its ech_nonce
	extECHNonceDraft07       = 0xff03
	extECHOuterExtensions    = 0xfd00
	recordTypeHandshake      = 22
	handshakeTypeClientHello = 1
	serverNameTypeHostName   = 0
	tlsRecordHeaderLen       = 5
	handshakeHeaderLen       = 4
)

// HelloError says why a ClientHello was refused, with the reason code.
type HelloError struct {
	Reason policy.Reason
	Msg    string
	// ServerName is the server_name as sent, when it is not a host name:
	// where the client meant to go, for the audit log (escaped there).
	ServerName string
}

func (e *HelloError) Error() string { return "clienthello: " + e.Msg }

func helloErr(r policy.Reason, msg string) error { return &HelloError{Reason: r, Msg: msg} }

// rawServerName is the server_name a hello refused for err sent, when it
// was not a host name, or "".
func rawServerName(err error) string {
	var he *HelloError
	if errors.As(err, &he) {
		return he.ServerName
	}
	return ""
}

// ReadClientHello reads the first TLS handshake message from br, reassembling
// it across records, and returns every byte it consumed (to replay to the
// origin) and the server_name it carries.
//
// It refuses, with the reason code in a *HelloError: anything that is not a
// TLS handshake (not_tls); a hello without exactly one host_name entry
// (sni_missing); Encrypted ClientHello or legacy ESNI, which hide the real
// destination (ech_present; Chromium's GREASE ECH is refused too); and
// duplicated extensions, which parsers disagree on (not_tls).
// The caller sets the read deadline.
func ReadClientHello(br *bufio.Reader) (raw []byte, sni allowlist.Name, err error) {
	// raw is the one buffer kept: each record lands in it directly. hs, the
	// handshake reassembled, is a view of raw's one record in the common
	// case, and a copy only when the hello spans records.
	var hs []byte
	for records := 0; ; records++ {
		hdr, err := readRecordHeader(br)
		if err != nil {
			return raw, sni, readErr(err, raw)
		}
		if hdr[0] != recordTypeHandshake || hdr[1] != 3 {
			return append(raw, hdr[:]...), sni, helloErr(policy.NotTLS, "not a TLS handshake record")
		}
		n := int(hdr[3])<<8 | int(hdr[4])
		if n == 0 || len(hs)+n > maxHelloBytes {
			return append(raw, hdr[:]...), sni, helloErr(policy.NotTLS, "handshake record of a size no ClientHello has")
		}
		start := len(raw) + tlsRecordHeaderLen
		raw = append(slices.Grow(raw, tlsRecordHeaderLen+n), hdr[:]...)
		raw = raw[:start+n]
		if _, err := io.ReadFull(br, raw[start:]); err != nil {
			return raw[:start], sni, readErr(err, raw[:start])
		}
		if records == 0 {
			hs = raw[start : start+n : start+n] // full: a later append copies
		} else {
			hs = append(hs, raw[start:]...)
		}
		if len(hs) < handshakeHeaderLen {
			continue
		}
		if hs[0] != handshakeTypeClientHello {
			return raw, sni, helloErr(policy.NotTLS, "first handshake message is not a ClientHello")
		}
		want := handshakeHeaderLen + (int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3]))
		if want > maxHelloBytes {
			return raw, sni, helloErr(policy.NotTLS, "ClientHello larger than 16 KiB")
		}
		if len(hs) >= want {
			if len(hs) > want {
				return raw, sni, helloErr(policy.NotTLS, "data after the ClientHello in its record")
			}
			sni, err = parseClientHello(hs[handshakeHeaderLen:])
			return raw, sni, err
		}
	}
}

// readRecordHeader reads a record header into an array that stays on the
// stack (io.ReadFull through the io.Reader interface would move it to the
// heap, once per record of every connection).
func readRecordHeader(br *bufio.Reader) (hdr [tlsRecordHeaderLen]byte, err error) {
	b, err := br.Peek(tlsRecordHeaderLen)
	copy(hdr[:], b)
	br.Discard(len(b))
	if err != nil && len(b) > 0 && errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF // as io.ReadFull says it: a header cut short
	}
	return hdr, err
}

func readErr(err error, raw []byte) error {
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return helloErr(policy.Timeout, "no complete ClientHello before the deadline")
	}
	if len(raw) == 0 && errors.Is(err, io.EOF) {
		return helloErr(policy.NotTLS, "client closed the tunnel without sending anything")
	}
	return helloErr(policy.NotTLS, "incomplete TLS record")
}

// parseClientHello reads the ClientHello body (RFC 8446 §4.1.2) and returns
// its one host_name.
func parseClientHello(b []byte) (allowlist.Name, error) {
	s := cryptobyte.String(b)
	var version uint16
	var random, sessionID, suites, compression, exts cryptobyte.String
	if !s.ReadUint16(&version) || !s.ReadBytes((*[]byte)(&random), 32) ||
		!s.ReadUint8LengthPrefixed(&sessionID) || !s.ReadUint16LengthPrefixed(&suites) ||
		!s.ReadUint8LengthPrefixed(&compression) {
		return allowlist.Name{}, helloErr(policy.NotTLS, "malformed ClientHello")
	}
	if s.Empty() {
		return allowlist.Name{}, helloErr(policy.SNIMissing, "ClientHello has no extensions")
	}
	if !s.ReadUint16LengthPrefixed(&exts) || !s.Empty() {
		return allowlist.Name{}, helloErr(policy.NotTLS, "malformed ClientHello extensions")
	}
	var seen extensionsSeen
	var sni allowlist.Name
	found := false
	for !exts.Empty() {
		var typ uint16
		var data cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&data) {
			return allowlist.Name{}, helloErr(policy.NotTLS, "malformed extension")
		}
		if !seen.add(typ) {
			return allowlist.Name{}, helloErr(policy.NotTLS, "an extension appears twice (RFC 8446 §4.2 forbids it)")
		}
		if isECHCodePoint(typ) {
			return allowlist.Name{}, helloErr(policy.ECHPresent, "Encrypted ClientHello or ESNI present")
		}
		if typ == extServerName {
			n, err := parseServerName(data)
			if err != nil {
				return allowlist.Name{}, err
			}
			sni, found = n, true
		}
	}
	if !found {
		return allowlist.Name{}, helloErr(policy.SNIMissing, "no server_name extension")
	}
	return sni, nil
}

// extensionsSeen is the set of extension types met so far: a list on the
// stack for the twenty-odd a real hello has, a map past that, so a hostile
// hello of thousands of extensions costs linear time, not quadratic.
type extensionsSeen struct {
	few  [32]uint16
	n    int
	many map[uint16]bool
}

// add records typ and reports whether it was new.
func (s *extensionsSeen) add(typ uint16) bool {
	if s.many != nil {
		if s.many[typ] {
			return false
		}
		s.many[typ] = true
		return true
	}
	if slices.Contains(s.few[:s.n], typ) {
		return false
	}
	if s.n < len(s.few) {
		s.few[s.n] = typ
		s.n++
		return true
	}
	s.many = make(map[uint16]bool, 2*len(s.few))
	for _, t := range s.few {
		s.many[t] = true
	}
	s.many[typ] = true
	return true
}

// isECHCodePoint reports an extension that hides the real destination
// under any code point Encrypted ClientHello or ESNI was ever sent with: the
// final 0xfe0d, the drafts of draft-ietf-tls-esni from 0xfe01 up (a front
// end still speaking a draft decrypts them and routes on the inner name),
// draft 07's 0xff02 and 0xff03, the ESNI drafts' 0xffce, and 0xfd00
// (ech_outer_extensions, which only an ECH inner hello carries). 0xff01
// is renegotiation_info (RFC 5746), which every client sends: not ECH.
func isECHCodePoint(typ uint16) bool {
	switch {
	case typ >= extECHDraftFirst && typ <= extEncryptedClientHello,
		typ == extECHDraft07, typ == extECHNonceDraft07,
		typ == extLegacyESNI, typ == extECHOuterExtensions:
		return true
	}
	return false
}

// parseServerName reads server_name_list (RFC 6066 §3): exactly one entry,
// of type host_name, which must parse as a wire name without a trailing dot.
func parseServerName(data cryptobyte.String) (allowlist.Name, error) {
	var list cryptobyte.String
	if !data.ReadUint16LengthPrefixed(&list) || !data.Empty() {
		return allowlist.Name{}, helloErr(policy.SNIMissing, "malformed server_name")
	}
	var typ uint8
	var host cryptobyte.String
	if !list.ReadUint8(&typ) || !list.ReadUint16LengthPrefixed(&host) {
		return allowlist.Name{}, helloErr(policy.SNIMissing, "empty server_name list")
	}
	if !list.Empty() {
		return allowlist.Name{}, helloErr(policy.SNIMissing, "more than one server_name entry")
	}
	if typ != serverNameTypeHostName {
		return allowlist.Name{}, helloErr(policy.SNIMissing, "server_name entry is not a host_name")
	}
	n, err := allowlist.ParseWireHost(string(host), allowlist.SNIForm)
	if err != nil {
		return allowlist.Name{}, &HelloError{Reason: policy.SNIMismatch, Msg: "server_name is not a valid host name", ServerName: audit.CapTarget(string(host))}
	}
	return n, nil
}
