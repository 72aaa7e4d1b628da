package policy

import (
	"fmt"

	"github.com/egressd/egressd/allowlist"
)

// Sentence is the one line egressd tells an integration's author about a
// decision: what happened and what to do. The 403 body and "egressd
// explain" both use it. It names only the canonical host, never the raw
// target, so nothing the client sent is echoed back.
func Sentence(d Decision, p *Policy) string {
	host := d.Host.String()
	who := "this integration"
	where := "its manifest's network permission"
	if p != nil && p.Manifest != nil {
		// While an id change waits the old id's list is in force: every
		// sentence names it, never the id the operator has not approved.
		id, version := p.InForce()
		who = id + " " + version
		where = p.Manifest.Format.EntriesKey()
	}
	switch d.Reason {
	case Allowed:
		if d.Verdict == WouldDeny {
			return fmt.Sprintf("egressd: %s is not in the network permission of %s; allowed only because audit mode is on (add it to %s)", host, who, where)
		}
		if change := p.PendingChange(); change != "" {
			return fmt.Sprintf("egressd: %s is allowed for %s, the list in force for this folder, by the entry %q; the folder's id change to %s waits for the operator's approval (%s)", host, who, d.Rule, change, p.ApproveCommand())
		}
		if p != nil && p.Pending != "" && p.PendingKeptVersion != "" {
			who = p.Manifest.ID + " " + p.PendingKeptVersion // the list in force is that version's
		}
		return fmt.Sprintf("egressd: %s is allowed for %s by the entry %q", host, who, d.Rule)
	case NotAllowlisted:
		if d.Verdict == WouldDeny {
			return fmt.Sprintf("egressd: %s is not in the network permission of %s; allowed only because audit mode is on (add it to %s)", host, who, where)
		}
		return fmt.Sprintf("egressd: %s is not in the network permission of %s (add it to %s)", host, who, where)
	case PendingApproval:
		waiting := who
		if p != nil && p.Pending != "" && p.PendingIDFrom == "" {
			waiting = p.Manifest.ID + " " + p.Pending // the version that waits, not the one in force
		}
		if d.Verdict == WouldDeny {
			who = waiting
			if change := p.PendingChange(); change != "" {
				who = change
			}
			return fmt.Sprintf("egressd: %s is in the list of %s, which waits for the operator's approval (%s); allowed only because audit mode is on", host, who, p.ApproveCommand())
		}
		if p != nil && p.PendingIDFrom == "" && p.PendingUnbound {
			return fmt.Sprintf("egressd: %s is in the list of %s, whose id version memory binds to no folder (it was forgotten with state forget --folder, or kept by an earlier egressd); this folder's claim waits for the operator's approval: %s; until then nothing is allowed for it", host, who, p.approveManifestCommand())
		}
		if p != nil && p.PendingIDFrom == "" && len(p.PendingClaimOf) > 0 {
			return fmt.Sprintf("egressd: %s is in the list of %s, whose id version memory binds to another folder; this folder's claim waits for the operator's approval: %s; until then nothing is allowed for it", host, who, p.ApproveCommand())
		}
		if change := p.PendingChange(); change != "" {
			return fmt.Sprintf("egressd: %s is in the list of %s, the id this folder changed to from %s, which waits for the operator's approval: %s; until then the list of %s applies", host, change, p.PendingIDFrom, p.ApproveCommand(), who)
		}
		return fmt.Sprintf("egressd: %s is in the list of %s, which waits for the operator's approval: %s; until then the last approved list applies", host, waiting, p.ApproveCommand())
	case IPLiteral:
		return fmt.Sprintf("egressd: IP addresses cannot be reached directly; connect by a hostname listed in the network permission of %s", who)
	case BadRequest:
		return "egressd: the CONNECT target must be a hostname and a port, like api.example.com:443"
	case MethodNotAllowed:
		return "egressd: only CONNECT is served; use https:// URLs through this proxy"
	case PortNotAllowed:
		return fmt.Sprintf("egressd: port %d is not allowed for %s; egressd carries https on port 443 only", d.Port, who)
	case OperatorDenied:
		return fmt.Sprintf("egressd: %s is denied by the operator's policy (%s); a manifest cannot override it", orAddress(host), d.Rule)
	case PrivateAddress:
		return fmt.Sprintf("egressd: %s resolves to a private or reserved address, which egressd never connects to", host)
	case DNSError:
		return fmt.Sprintf("egressd: %s could not be resolved", host)
	case DialError:
		return fmt.Sprintf("egressd: could not connect to %s", host)
	case NotTLS:
		return "egressd: the tunnel must start with a TLS ClientHello (https only)"
	case SNIMissing:
		return "egressd: the TLS ClientHello must name the host in exactly one server_name"
	case SNIMismatch:
		return fmt.Sprintf("egressd: the TLS server_name does not match the CONNECT host %s", host)
	case ECHPresent:
		return "egressd: Encrypted ClientHello hides the destination and is not allowed through egressd"
	case LimitExceeded:
		return fmt.Sprintf("egressd: too many connections from %s; retry later", who)
	case Timeout:
		return "egressd: the client was too slow"
	case ManifestNotLoaded:
		return NotLoadedSentence("")
	case AuditUnavailable:
		return "egressd: the audit log cannot be written, so no connection is allowed"
	case IntegrationRemoved:
		return "egressd: the integration this connection was accepted for was removed from egressd's configuration; nothing is connected for it"
	case PolicyNarrowed:
		return fmt.Sprintf("egressd: %s is no longer allowed for %s after a policy reload", host, who)
	case SecretMisdirected:
		return fmt.Sprintf("egressd: this request to %s carries the placeholder of a secret the operator bound to other hosts; send it only to the hosts it is bound to", host)
	case SecretMisplaced:
		return fmt.Sprintf("egressd: this request to %s carries a placeholder where the secret would not reach %s as it is: as plain text inside a Basic credential (put it in user:password and base64-encode that; egressd adds the secret inside), or in a Cookie while the secret holds ';'", host, host)
	case SecretGuessed:
		return fmt.Sprintf("egressd: a request of %s to %s carried the real value of a secret, which a program is never given and should never hold (a guess, or a leak); egressd now refuses every request of this integration to the hosts it adds secrets for, until egressd restarts", who, host)
	case HostMismatch:
		return fmt.Sprintf("egressd: the request's Host (or :authority) must be %s, the host this connection was opened to", host)
	case UpstreamUnverified:
		return fmt.Sprintf("egressd: the certificate of %s could not be verified, so no secret was sent; the operator can add its CA with --upstream-ca (run) or tls.upstream_ca (serve)", host)
	case ResponseRefused:
		return fmt.Sprintf("egressd: %s answered with part of a body (206 or multipart/byteranges), which egressd never asks a host it adds a secret for; the answer was not relayed", host)
	case BrokerUnavailable:
		return fmt.Sprintf("egressd: a secret is bound to %s but this egressd has no broker CA to add it with; the operator must configure one (tls.ca_cert and tls.ca_key)", host)
	}
	return "egressd: denied"
}

// BrokeredCapSentence refuses a connection to host, a host a secret is
// bound to, while the integration holds max such connections already
// (limits.max_brokered_connections): egressd decrypts each to add the
// secret, which costs far more than a tunnel it splices.
func BrokeredCapSentence(host allowlist.Name, max int64, p *Policy) string {
	who := "this integration"
	if p != nil && p.Manifest != nil {
		id, version := p.InForce()
		who = id + " " + version
	}
	return fmt.Sprintf("egressd: %s already holds limits.max_brokered_connections (%d) connections egressd decrypts to add a secret, the most it may hold at once; %s is allowed: reuse or close one of them (keep-alive, HTTP/2), or retry later", who, max, host)
}

func orAddress(host string) string {
	if host == "" {
		return "the address"
	}
	return host
}

// NotLoadedSentence is the refusal of every connection to an integration
// whose manifest is not loaded; why is Registry.NotLoadedToClient's "path:
// class", never the load error itself (it may quote a file the integration
// cannot read), capped here, since the path is long at will.
func NotLoadedSentence(why string) string {
	if why == "" {
		why = "its manifest did not load"
	}
	if r := []rune(why); len(r) > 400 {
		why = string(r[:400]) + "…"
	}
	return "egressd: this integration's manifest is not loaded, so every connection is refused until a reload loads it (" + why + ")"
}
