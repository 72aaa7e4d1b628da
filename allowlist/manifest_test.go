package allowlist

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// smallestVoiceOS is the spec's "smallest valid manifest", verbatim.
const smallestVoiceOS = `{
  "schemaVersion": 1,
  "id": "com.you.coffee-tracker",
  "version": "1.0.0",
  "name": "Coffee Tracker",
  "summary": "Log every coffee by voice and glance your habits in the notch.",
  "publisher": { "id": "pub_you", "name": "You" },
  "runtime": { "kind": "local-mcp", "command": "bun", "args": ["server.ts"] },
  "tools": [
    {
      "name": "coffee_stats",
      "description": "Show how much coffee the user has been drinking. Use when the user asks about their coffee habits, count, or stats.",
      "inputSchema": { "type": "object", "properties": {} }
    }
  ]
}`

func TestSmallestVoiceOSManifestMeansNoEgress(t *testing.T) {
	m, ps := Parse(VoiceOSFile, []byte(smallestVoiceOS), nil)
	if m == nil || len(ps) != 0 {
		t.Fatalf("Parse: %v", ps)
	}
	if m.ID != "com.you.coffee-tracker" || m.Version != "1.0.0" || m.Format != VoiceOS || len(m.Entries) != 0 {
		t.Fatalf("got %+v", m)
	}
	if m.Runtime.Kind != "local-mcp" || m.Runtime.Command != "bun" || strings.Join(m.Runtime.Args, " ") != "server.ts" {
		t.Fatalf("runtime = %+v", m.Runtime)
	}
}

func TestExampleManifestsLoad(t *testing.T) {
	cases := []struct {
		dir, id, entries string
		format           Format
		env              string
	}{
		{"../configs/examples/coffee-tracker", "com.you.coffee-tracker", "api.coffee.example *.cdn.coffee.example", VoiceOS, "COFFEE_API_KEY"},
		{"../configs/examples/acme-erp", "com.acme.erp", "erp.acme.example *.cdn.acme.example", Sollar, ""},
	}
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			m, _, ps, err := Load(tc.dir, nil)
			if err != nil || m == nil {
				t.Fatalf("Load: %v %v", err, ps)
			}
			var got []string
			for _, e := range m.Entries {
				got = append(got, e.String())
			}
			if m.ID != tc.id || m.Format != tc.format || strings.Join(got, " ") != tc.entries || strings.Join(m.EnvKeys, " ") != tc.env {
				t.Fatalf("got %+v", m)
			}
		})
	}
}

func voiceos(permissions string) string {
	return `{"schemaVersion":1,"id":"com.x.y","version":"1.0.0","runtime":{"kind":"remote-mcp","url":"https://x"},"permissions":` + permissions + `}`
}

func TestManifestProblems(t *testing.T) {
	cases := []struct {
		name, file, doc string
		want            []string // every problem, "path: message", warnings prefixed "warning: "
		loads           bool
	}{
		{"issue_example_bare_ip", VoiceOSFile, voiceos(`[{"kind":"network","domains":["a.example.com","b.example.com","10.0.0.1"]}]`),
			[]string{`permissions[0].domains[2]: bare IP addresses are not allowed ("10.0.0.1")`}, false},
		{"domains_missing", VoiceOSFile, voiceos(`[{"kind":"network"}]`),
			[]string{`permissions[0].domains: is required in a network permission`}, false},
		{"domains_wrong_type", VoiceOSFile, voiceos(`[{"kind":"network","domains":"api.example.com"}]`),
			[]string{`permissions[0].domains: must be an array`}, false},
		{"domain_wrong_type", VoiceOSFile, voiceos(`[{"kind":"network","domains":[42]}]`),
			[]string{`permissions[0].domains[0]: must be a string`}, false},
		{"unknown_key_in_network_permission", VoiceOSFile, voiceos(`[{"kind":"network","domains":[],"ports":[80]}]`),
			[]string{`permissions[0].ports: unknown key (allowed: [kind domains])`}, false},
		{"case_folded_key_confusion", VoiceOSFile, voiceos(`[{"kind":"network","domains":["a.example.com"],"DOMAINS":["evil.example"]}]`),
			[]string{`permissions[0].DOMAINS: key differs from "domains" only in case; tools disagree on which one counts`}, false},
		{"duplicate_key_confusion", VoiceOSFile, voiceos(`[{"kind":"network","domains":["a.example.com"],"domains":["evil.example"]}]`),
			[]string{`permissions[0].domains: key appears twice; tools disagree on which one counts`}, false},
		{"permissions_wrong_type", VoiceOSFile, voiceos(`{"kind":"network"}`),
			[]string{`permissions: must be an array`}, false},
		{"runtime_command_absolute_host_path", VoiceOSFile, `{"schemaVersion":1,"id":"com.x.y","version":"1.0.0","runtime":{"kind":"local-mcp","command":"/home/victim/.ssh/interp"}}`,
			[]string{`runtime.command: must be a program name (looked up in the launcher's PATH) or a path inside the integration folder ("/home/victim/.ssh/interp"): a manifest does not choose host paths; an operator can pass the program after --`}, false},
		{"runtime_command_climbs_out", VoiceOSFile, `{"schemaVersion":1,"id":"com.x.y","version":"1.0.0","runtime":{"kind":"local-mcp","command":"bin/../../secret/interp"}}`,
			[]string{`runtime.command: must be a program name (looked up in the launcher's PATH) or a path inside the integration folder ("bin/../../secret/interp"): a manifest does not choose host paths; an operator can pass the program after --`}, false},
		{"schema_version_wrong", VoiceOSFile, `{"schemaVersion":2,"id":"com.x.y","version":"1.0.0","runtime":{"kind":"hosted"}}`,
			[]string{`schemaVersion: must be 1, not 2`}, false},
		{"id_not_reverse_dns", VoiceOSFile, `{"schemaVersion":1,"id":"Coffee","version":"1.0.0","runtime":{"kind":"hosted"}}`,
			[]string{`id: must be reverse-DNS like "com.you.coffee-tracker" ("Coffee")`}, false},
		{"version_not_semver", VoiceOSFile, `{"schemaVersion":1,"id":"com.x.y","version":"1.0","runtime":{"kind":"hosted"}}`,
			[]string{`version: must be a semantic version like "1.0.0" ("1.0")`}, false},
		{"version_leading_zero", VoiceOSFile, `{"schemaVersion":1,"id":"com.x.y","version":"01.0.0","runtime":{"kind":"hosted"}}`,
			[]string{`version: must be a semantic version like "1.0.0" ("01.0.0")`}, false},
		{"warnings_still_load", VoiceOSFile, voiceos(`[{"kind":"network","domains":["API.example.com","api.example.com."]}]`),
			[]string{`warning: permissions[0].domains[0]: normalised to lower case "api.example.com"`, `warning: permissions[0].domains[1]: trailing dot removed: "api.example.com"`, `warning: permissions[0].domains[1]: duplicate entry "api.example.com"`}, true},
		{"fields_egressd_does_not_use_are_ignored", VoiceOSFile, `{"schemaVersion":1,"id":"com.x.y","version":"1.0.0","runtime":{"kind":"hosted"},"tools":"not even an array","permissions":[{"kind":"notify"},{"kind":"store","quotaKb":1}]}`,
			nil, true},
		{"sollar_connect_missing", SollarFile, `{"manifest_version":1,"id":"com.acme.erp","version":"2.4.1","network":{}}`,
			[]string{`network.connect: is required in network`}, false},
		{"sollar_unknown_network_key", SollarFile, `{"manifest_version":1,"id":"com.acme.erp","version":"2.4.1","network":{"connect":[],"listen":[]}}`,
			[]string{`network.listen: unknown key (allowed: [connect])`}, false},
		{"sollar_wildcard_alone", SollarFile, `{"manifest_version":1,"id":"com.acme.erp","version":"2.4.1","network":{"connect":["*"]}}`,
			[]string{`network.connect[0]: a wildcard alone would allow every host; list the hosts you need ("*")`}, false},
		{"sollar_without_network_means_no_egress", SollarFile, `{"manifest_version":1,"id":"com.acme.erp","version":"2.4.1"}`, nil, true},
		{"detected_by_content", "whatever.json", `{"manifest_version":1,"id":"com.acme.erp","version":"2.4.1","network":{"connect":["erp.acme.example"]}}`, nil, true},
		{"not_json", SollarFile, `{"manifest_version":1,`, []string{`not valid JSON at line 1, column 23: unexpected end of JSON input`}, false},
		{"trailing_garbage", SollarFile, `{"manifest_version":1,"id":"com.acme.erp","version":"2.4.1"} {}`, []string{`not valid JSON at line 1, column 62: invalid character '{' after top-level value`}, false},
		{"unknown_format", "x.json", `{"name":"x"}`, []string{`not a manifest egressd knows: expected voiceos.integration.json (schemaVersion) or manifest.json (manifest_version)`}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, ps := Parse(tc.file, []byte(tc.doc), nil)
			var got []string
			for _, p := range ps {
				s := p.String()
				if p.Severity == Warning {
					s = "warning: " + s
				}
				got = append(got, s)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("problems\n got: %q\nwant: %q", got, tc.want)
			}
			if (m != nil) != tc.loads {
				t.Errorf("loaded = %v, want %v", m != nil, tc.loads)
			}
		})
	}
}

func TestLongListWarns(t *testing.T) {
	var hosts []string
	for i := 0; i < 21; i++ {
		hosts = append(hosts, `"h`+string(rune('a'+i))+`.example.com"`)
	}
	m, ps := Parse(VoiceOSFile, []byte(voiceos(`[{"kind":"network","domains":[`+strings.Join(hosts, ",")+`]}]`)), nil)
	if m == nil || len(ps) != 1 || ps[0].String() != "permissions[0].domains: 21 entries: a long list reads as a liability; list only the hosts you call" {
		t.Fatalf("got %v", ps)
	}
}

func TestDigestIgnoresOrder(t *testing.T) {
	a, _ := Parse(SollarFile, []byte(`{"manifest_version":1,"id":"com.a.b","version":"1.0.0","network":{"connect":["a.example.com","b.example.com"]}}`), nil)
	b, _ := Parse(SollarFile, []byte(`{"manifest_version":1,"id":"com.a.b","version":"1.0.0","network":{"connect":["b.example.com","A.example.com"]}}`), nil)
	c, _ := Parse(SollarFile, []byte(`{"manifest_version":1,"id":"com.a.b","version":"1.0.0","network":{"connect":["b.example.com"]}}`), nil)
	if a.Digest() != b.Digest() || a.Digest() == c.Digest() {
		t.Fatalf("digests: %s %s %s", a.Digest(), b.Digest(), c.Digest())
	}
}

func TestLocateRefusesFolderWithBothFormats(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{VoiceOSFile, SollarFile} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Locate(dir); err == nil || !strings.Contains(err.Error(), "holds both") {
		t.Fatalf("Locate = %v", err)
	}
}

func TestDeepNestingIsRefusedNotRecursed(t *testing.T) {
	doc := `{"manifest_version":1,"x":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`
	if m, ps := Parse(SollarFile, []byte(doc), nil); m != nil || !strings.Contains(ps.Error(), "nested deeper than 64 levels") {
		t.Fatalf("got %v %v", m, ps)
	}
}
