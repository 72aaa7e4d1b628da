package policy

// Reason is a fixed reason code. The codes are the audit log's and the
// X-Egress-Reason header's vocabulary; they never change meaning.
type Reason string

// The reason codes, as DESIGN.md "Audit events" lists them.
const (
	Allowed          Reason = "allowed"
	NotAllowlisted   Reason = "not_allowlisted"
	IPLiteral        Reason = "ip_literal"
	BadRequest       Reason = "bad_request"
	MethodNotAllowed Reason = "method_not_allowed"
	PortNotAllowed   Reason = "port_not_allowed"
	OperatorDenied   Reason = "operator_denied"
	PrivateAddress   Reason = "private_address"
	DNSError         Reason = "dns_error"
	DialError        Reason = "dial_error"
	NotTLS           Reason = "not_tls"
	SNIMissing       Reason = "sni_missing"
	SNIMismatch      Reason = "sni_mismatch"
	ECHPresent       Reason = "ech_present"
	LimitExceeded    Reason = "limit_exceeded"
	Timeout          Reason = "timeout"
	AuditUnavailable Reason = "audit_unavailable"
	PolicyNarrowed   Reason = "policy_narrowed"
	NoPolicy         Reason = "no_policy"
	// ManifestNotLoaded is every connection to the listener of an
	// integration whose manifest has never loaded (broken, rolled back,
	// or not read in time): it serves nothing until a reload loads it.
	ManifestNotLoaded Reason = "manifest_not_loaded"
	// IntegrationRemoved is a request on a connection a listener accepted
	// for an integration that a reload then removed from the config.
	IntegrationRemoved Reason = "integration_removed"
	// PendingApproval is a host the manifest lists in a version whose
	// widening (or id change) waits for "egressd approve".
	PendingApproval Reason = "pending_approval"
	// Credential brokering (issue 15): a request on a brokered connection
	// carrying the placeholder of a secret bound to another host; a request
	// whose Host or :authority is not the connection's host; an origin whose
	// certificate egressd could not verify; a secret bound with no broker.
	SecretMisdirected Reason = "secret_misdirected"
	// SecretMisplaced is a bound placeholder written raw inside a Basic
	// credential, where the origin decodes it as base64: the value would
	// reach the origin as bytes it can echo and no scrubber recognises.
	SecretMisplaced    Reason = "secret_misplaced"
	HostMismatch       Reason = "host_mismatch"
	UpstreamUnverified Reason = "upstream_unverified"
	BrokerUnavailable  Reason = "broker_unavailable"
	// ResponseRefused is a brokered origin's answer egressd never asked
	// for and will not relay: a 206 or a multipart/byteranges body, which
	// could carry a piece of a value the scrubber cannot recognise.
	ResponseRefused Reason = "response_refused"
	// SecretGuessed is a brokered request the program wrote carrying a
	// secret's real value (raw, or a stable piece of its base64), which it
	// never legitimately holds: a guess, or a leak. Refusing it, and every
	// later brokered request of the integration, ends what an echoing
	// origin told a program about its guesses (a whole list per request)
	// at the first hit.
	SecretGuessed Reason = "secret_guessed"
)

// Verdict is the outcome of a decision. The zero Verdict denies.
type Verdict uint8

const (
	Deny Verdict = iota
	Allow
	// WouldDeny is audit mode's verdict for a host outside the allowlist:
	// the connection goes ahead and the log says it would have been denied.
	WouldDeny
)

func (v Verdict) String() string {
	switch v {
	case Allow:
		return "allow"
	case WouldDeny:
		return "would_deny"
	}
	return "deny"
}

// Permits reports whether the connection may go ahead.
func (v Verdict) Permits() bool { return v == Allow || v == WouldDeny }
