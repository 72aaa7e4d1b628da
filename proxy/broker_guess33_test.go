package proxy

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/policy"
)

// valueSecrets binds value as PASS to api.allowed.example.
func valueSecrets(t *testing.T, value string) []policy.Secret {
	t.Helper()
	e, _, err := allowlist.ParseEntry("api.allowed.example")
	if err != nil {
		t.Fatal(err)
	}
	ph, _ := policy.NewPlaceholder([]byte(value), nil)
	return []policy.Secret{{Name: "PASS", Hosts: []allowlist.Entry{e}, Placeholder: ph, Value: []byte(value)}}
}

// uuencoded writes b as a uuencoded file ("begin", lines of 45 bytes,
// "`" for a zero sextet, "end"), as uuencode(1) and Python's uu do.
func uuencoded(b []byte) string {
	enc := func(v byte) byte {
		if v == 0 {
			return '`'
		}
		return v + 32
	}
	var sb strings.Builder
	sb.WriteString("begin 644 note.txt\r\n")
	for len(b) > 0 {
		n := min(45, len(b))
		chunk := append([]byte(nil), b[:n]...)
		b = b[n:]
		sb.WriteByte(enc(byte(n)))
		for len(chunk)%3 != 0 {
			chunk = append(chunk, 0)
		}
		for i := 0; i < len(chunk); i += 3 {
			c0, c1, c2 := chunk[i], chunk[i+1], chunk[i+2]
			for _, v := range []byte{c0 >> 2, (c0<<4 | c1>>4) & 63, (c1<<2 | c2>>6) & 63, c2 & 63} {
				sb.WriteByte(enc(v))
			}
		}
		sb.WriteString("\r\n")
	}
	sb.WriteString("`\r\nend\r\n")
	return sb.String()
}

// TestGuessesHiddenWhereTheGuardsQuotedPrintableViewDifferedFromTheOriginsAreRefused:
// round 33. The guard had one quoted-printable decoder mixing Go's and
// Python's rules, which passed bytes through past 128 of them; each origin
// decodes by its own rules, and a guess list written where the two differ
// reached the origin whole and came back with the right line scrubbed:
//   - '=', 129 blanks, CRLF: a soft break to Go's mime/quotedprintable;
//   - '=', CR, 130 bytes, LF: a soft break to Python's binascii.a2b_qp;
//   - "= " then CR: to both a literal "= " and CR, and the escape after
//     it decoded (the guard dropped everything up to the LF);
//   - "==": '=' to Python (the guard read '=' then the escape "=de");
//   - the list uuencoded in a part labelled x-uuencode, which Python's
//     email package decodes;
//   - the list's base64 with junk between, written =XX (an origin that
//     decodes the part, then the base64 leniently): each view's output
//     is read through the alphabet view too.
//
// Each is refused secret_guessed, the origin never has it whole.
func TestGuessesHiddenWhereTheGuardsQuotedPrintableViewDifferedFromTheOriginsAreRefused(t *testing.T) {
	const dbleq = "AccountKey=deadbeef42"
	for _, tc := range []struct {
		name, value string
		guesses     []string
		cte         string
		write       func(string) string // one guess, as written in the part
	}{
		{"'=' 129 blanks CRLF (Go)", guessPlus, nil, "", func(g string) string { return g[:4] + "=" + strings.Repeat(" ", 129) + "\r\n" + g[4:] }},
		{"'=' CR 130 bytes LF (Python)", guessPlus, nil, "", func(g string) string { return g[:4] + "=\r" + strings.Repeat("x", 130) + "\n" + g[4:] }},
		{"'= ' CR then an escape (Go and Python)", guessPlus, nil, "", func(g string) string { return "= \r" + g[:4] + fmt.Sprintf("=%02X", g[4]) + g[5:] }},
		{"'==' for '=' (Python)", dbleq, []string{"AccountKey=cafebabe42", dbleq, "AccountKey=feedface42"}, "", func(g string) string { return strings.ReplaceAll(g, "=", "==") }},
		{"uuencoded, x-uuencode (Python)", guessPlus, nil, "x-uuencode", nil},
		{"base64 written =XX with junk between (Go and Python)", guessPlus, nil, "", nil},
	} {
		for _, h2 := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{false: " h1", true: " h2"}[h2], func(t *testing.T) {
				b := newBrokerEnv(t, h2, multipartEcho, func(e *env) { e.secrets = valueSecrets(t, tc.value) })
				guesses := tc.guesses
				if guesses == nil {
					guesses = []string{"summer+2018", "summer+2019", "autumn+2019", guessPlus, "spring+2020"}
				}
				var text string
				if tc.write != nil {
					var lines []string
					for _, g := range guesses {
						lines = append(lines, tc.write(g))
					}
					text = strings.Join(lines, "\r\n")
				} else if tc.cte == "x-uuencode" {
					text = uuencoded([]byte(strings.Join(guesses, "\r\n")))
				} else {
					// Base64 with a '.' after every fourth character (a
					// lenient base64 decoder skips it), every byte written
					// =XX: the hex digits are in the base64 alphabet, so
					// the raw alphabet view has no piece of the value.
					b64 := base64.StdEncoding.EncodeToString([]byte(strings.Join(guesses, "\r\n")))
					var cut strings.Builder
					for i := 0; i < len(b64); i += 4 {
						cut.WriteString(qpEveryByte(b64[i:min(i+4, len(b64))] + "."))
					}
					text = cut.String()
				}
				body, ct := encodedNoteForm(t, text, tc.cte)
				req := mustRequest(t, "POST", b.url("api.allowed.example", "/v1/notes"), body)
				req.Header.Set("Content-Type", ct)
				resp, answer := do(t, b.client(h2), req)
				wantGuessed(t, tc.name, resp, answer)
			})
		}
	}
}
