package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
	"unicode/utf8"
)

// Kind is what an event records.
type Kind string

const (
	Connect    Kind = "connect"   // one decision about one connection
	Close      Kind = "close"     // one tunnel's end, with byte counts
	DNS        Kind = "dns"       // a sandbox DNS answer
	Policy     Kind = "policy"    // a load or reload of one integration's policy
	Lifecycle  Kind = "lifecycle" // start, listener up, drain, stop; chain genesis and shutdown
	Checkpoint Kind = "checkpoint"
	// Request is one HTTP request on a brokered connection (issue 15):
	// the only traffic egressd ever sees decrypted.
	Request Kind = "request"
	// Response is the outcome of a brokered request whose request event
	// was written before it was sent (status, bytes, why it ended early):
	// the pair is linked by conn and req, like connect and close.
	Response Kind = "response"
)

// Event is one audit line. Zero fields are left out of the line. Every
// string is capped (see Cap) so a hostile value cannot grow the log.
type Event struct {
	Time        time.Time
	Kind        Kind
	Integration string
	// Claim is, while a manifest's claim of another folder's id waits for
	// the operator (policy.Policy.PendingClaimOf), the claiming folder: the
	// event is the claim's, not the id owner's.
	Claim              string
	IntegrationVersion string
	Generation         uint64
	Decision           string // allow, deny, would_deny
	Reason             string
	Host               string // canonical
	HostRaw            string // as sent; %q-escaped when written
	Port               uint16
	Rule               string
	SNI                string   // the ClientHello's server_name, when it is not the host
	SNIRaw             string   // the server_name as sent, when it is no host name; %q-escaped when written
	Addr               string   // the dialled address, ip:port
	CNAME              []string // the chain followed, owner first
	Exemption          string
	Conn               string // connection id, shared by connect and close
	Req                uint64 // request and response: the request's number on its connection, from 1
	Method             string
	Path               string   // request: the path, never the query (a query can carry a key)
	Status             int      // request: the status answered to the client
	Secrets            []string // request: the secrets substituted, by name, never by value
	BytesUp            int64
	BytesDown          int64
	// HelloBytes is, on the close of a tunnel refused after its allow line,
	// the size of the checked ClientHello the allow covered: bytes up past
	// it reached the origin before the refusal.
	HelloBytes    int64
	DurationMS    int64
	Suppressed    int64          // events folded into this summary, not written as lines
	Folded        []FoldedTarget // a summary's listed targets, with counts
	Unlisted      int64          // a summary's events whose target is not listed
	UnlistedRules []RuleCount    // a summary's unlisted events, per rule that decided them
	Listener      string         // lifecycle: the listener's real address
	Action        string         // lifecycle/policy: what happened (start, listening, drain, stop, loaded, …)
	Pending       string         // policy: version waiting for approval; policy and connect: "ID VERSION" of an id change waiting for it
	Manifest      string         // policy: the manifest path as configured
	// Entries is, on a policy event, the list in force after it (canonical
	// entries; empty when nothing is allowed, nil when unknown): a report
	// judges what was unused by the list in force when the traffic
	// happened, not by the manifest as it is when the report is read.
	Entries []string
	Msg     string
	Err     string
}

// Field caps. host_raw and sni_raw are capped at 253 bytes (the longest DNS
// name) before escaping, keeping both ends (CapTarget); every other string
// at 256, lists at 8 items.
const (
	maxHostRaw = 253
	maxField   = 256
	maxList    = 8
	// MaxPolicyEntries bounds a policy event's list in force. A manifest
	// lists no more (allowlist.MaxEntries), so the list is always written;
	// a longer one (never expected) is not.
	MaxPolicyEntries = 1024
)

// Cap bounds s to n bytes and never cuts silently: a cut value ends with
// the original length, "head…[400 bytes]", so a reader knows it is not
// the value as sent. The head ends on a UTF-8 character boundary.
func Cap(s string, n int) string {
	if len(s) <= n {
		return s
	}
	marker := "…[" + strconv.Itoa(len(s)) + " bytes]"
	if n < len(marker) {
		return s[:runeStartAtOrBefore(s, n)]
	}
	return s[:runeStartAtOrBefore(s, n-len(marker))] + marker
}

// CapIdentity bounds an identity-bearing value (an integration id, a
// version, a pending "ID VERSION", a claiming folder) to maxField bytes.
// Manifests bound ids and versions well below it, so a cut is never
// expected; should one happen, the marker carries the whole value's
// SHA-256 (128 bits), so two distinct identities never log the same and a
// refusal stays attributable to the one that made it.
func CapIdentity(s string) string {
	if len(s) <= maxField {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	marker := "…[" + strconv.Itoa(len(s)) + " bytes sha256:" + hex.EncodeToString(sum[:16]) + "]"
	return s[:runeStartAtOrBefore(s, maxField-len(marker))] + marker
}

// targetHead is how much of an over-long target's front CapTarget keeps;
// the rest of the room goes to its end, where a name's registrable domain
// (the destination) is.
const targetHead = 64

// CapTarget bounds a target as sent (a host, a CONNECT target, a
// server_name) to maxHostRaw bytes, keeping both ends: a front-only cut
// dropped the registrable domain a name ends with, so the destination was
// in no record and every destination behind the same filler folded into
// one. The cut is marked with the original length: "head…[281 bytes]…tail".
// It is the one place targets are capped, and a capped target is left as
// it is.
func CapTarget(s string) string {
	if len(s) <= maxHostRaw {
		return s
	}
	marker := "…[" + strconv.Itoa(len(s)) + " bytes]…"
	head := runeStartAtOrBefore(s, targetHead)
	tail := runeStartAtOrAfter(s, len(s)-(maxHostRaw-len(marker)-targetHead))
	return s[:head] + marker + s[tail:]
}

// runeStartAtOrBefore is the last index <= i that does not split a UTF-8
// sequence (i itself for bytes that are no valid UTF-8).
func runeStartAtOrBefore(s string, i int) int {
	for j := i; j > i-utf8.UTFMax && j > 0; j-- {
		if utf8.RuneStart(s[j]) {
			return j
		}
	}
	return i
}

// runeStartAtOrAfter is the first index >= i that does not split a UTF-8
// sequence.
func runeStartAtOrAfter(s string, i int) int {
	for j := i; j < i+utf8.UTFMax && j < len(s); j++ {
		if utf8.RuneStart(s[j]) {
			return j
		}
	}
	return i
}

// quoteRaw renders attacker-chosen bytes as a %q-escaped Go string, so
// control characters and invalid UTF-8 are visible, never interpreted.
func quoteRaw(s string) string { return string(appendQuotedRaw(nil, s)) }

// appendQuotedRaw appends quoteRaw(s) to b: what %q writes, without the
// quotes and without fmt's allocations.
func appendQuotedRaw(b []byte, s string) []byte {
	start := len(b)
	b = strconv.AppendQuote(b, CapTarget(s))
	copy(b[start:], b[start+1:len(b)-1]) // drop the quotes around it
	return b[:len(b)-2]
}
