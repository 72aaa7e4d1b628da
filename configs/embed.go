// Package configs holds egressd's documented example configuration and
// example integrations. It embeds the example integration that
// "egressd serve" runs when given no flags.
package configs

import _ "embed"

// DefaultManifest is the example integration "egressd serve" runs with no
// flags: a VoiceOS manifest allowing api.coffee.example and
// *.cdn.coffee.example.
//
//go:embed examples/coffee-tracker/voiceos.integration.json
var DefaultManifest []byte

// DefaultListen is where that example integration listens.
const DefaultListen = "127.0.0.1:3128"
