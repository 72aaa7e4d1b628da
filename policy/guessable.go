package policy

import "fmt"

// Brokering keeps a value from the program, and the request guard refuses
// a request that carries one, but a value that can be guessed can still be
// learnt: a program plants a guess list in the origin by a way the guard
// does not see (another allowed host of the service, a raw pipe after an
// upgrade) and reads it back through a brokered answer, where the
// scrubber's placeholder marks the right line. Any reaction to a value in
// an answer shows; passing echoes raw would leak every value. So egressd
// warns when a bound value looks chosen by a person rather than drawn at
// random.
const (
	// guessableBelow: a value shorter than this is warned about whatever
	// its characters (a password, a PIN).
	guessableBelow = 16
	// alnumGuessableBelow: a value of letters and digits only is warned
	// about below this length (a word and a year, a short hex id).
	alnumGuessableBelow = 20
)

// GuessableWarning says why the value of a secret bound by spec looks
// guessable, or "". The rule is a length, not an entropy estimate: a
// value under 16 bytes, or one of letters and digits only under 20.
func GuessableWarning(spec SecretSpec) string {
	why := ""
	switch n := len(spec.Value); {
	case n < guessableBelow:
		why = fmt.Sprintf("is %d bytes long", n)
	case n < alnumGuessableBelow && alnumOnly(spec.Value):
		why = fmt.Sprintf("is %d letters and digits", n)
	default:
		return ""
	}
	return fmt.Sprintf("%s: the value of %s %s, which a person may have chosen: "+
		"a program can learn a guessable value through a bound host that stores and shows back data "+
		"(a guess list planted by another way and read back scrubbed); broker random keys and tokens, not passwords",
		spec.At, spec.Name, why)
}

// GuessableWarnings is GuessableWarning for every binding of cfg, each
// line led by its integration's manifest path.
func GuessableWarnings(cfg Config) []string {
	var out []string
	for _, in := range cfg.Integrations {
		for _, spec := range in.Secrets {
			if msg := GuessableWarning(spec); msg != "" {
				out = append(out, in.Manifest+": "+msg)
			}
		}
	}
	return out
}

func alnumOnly(b []byte) bool {
	for _, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
