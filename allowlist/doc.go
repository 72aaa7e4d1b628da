// Package allowlist turns an integration's manifest into a compiled allowlist.
//
// It owns the two manifest formats (VoiceOS voiceos.integration.json and
// Sollar manifest.json), their problems as "path: message" strings, the
// canonical host name type with its two parsers, and the matcher.
//
// Every host egressd compares — a manifest entry, a CONNECT target, a TLS
// server_name or a DNS question — becomes a [Name] through exactly one of
// two parsers in this package: [ParseEntry], strict and IDNA-aware, for names
// people write; and [ParseWireHost], ASCII-only and never mapping, for names
// the hostile side sends. No other code lower-cases, trims or maps a host.
//
// The package reads bytes and files only; it knows nothing about sockets and
// decides nothing about operator policy (that is package policy).
package allowlist
