package broker

// phpNames reads form data as PHP names its variables: form-decoded, then
// ' ', '.' and '[' (one left unclosed) read as '_' in every name of
// $_GET, $_POST and $_COOKIE, and so in Symfony's and Laravel's requests
// (round 45: a guess list of sk_live_ keys written sk.live.…, sk+live+…
// and sk[live_… came back as names from PHP's own SAPI). The view maps
// every such byte, names or not: the program never holds a value, so
// whatever it finds is a guess all the same.
type phpNames struct{ form formDecoder }

func (d *phpNames) decode(b, out []byte) []byte {
	n := len(out)
	out = d.form.decode(b, out)
	phpName(out[n:])
	return out
}

func (d *phpNames) flushed(out []byte) []byte {
	n := len(out)
	out = d.form.flushed(out)
	phpName(out[n:])
	return out
}

// phpName maps in place the bytes PHP reads as '_' in a name.
func phpName(b []byte) {
	for i, c := range b {
		if c == ' ' || c == '.' || c == '[' {
			b[i] = '_'
		}
	}
}
