package broker

import (
	"bytes"
	"io"
	"math/rand/v2"
	"mime/quotedprintable"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// viewAll reads in through a fresh view, cut into reads at cut.
func viewAll(v mimeView, in string, cut int) []byte {
	got := v.decode([]byte(in[:cut]), nil)
	return v.decode([]byte(in[cut:]), got)
}

// adversarialQP are inputs where decoders differ: blank runs past 128,
// CR junk, "= \r", "==", lines past Go's 4096 bytes.
var adversarialQP = []string{
	"=77=69=6E=\r\n=74=65=72=2B=32=30=31=39",
	"wint=\r\ner+2019",
	"wint=  \r\ner+2019",
	"wint=\ner+2019",
	"a=3d=3Db",
	"plain text, no escapes",
	"wint=" + strings.Repeat(" ", 129) + "\r\ner+2019",
	"wint=" + strings.Repeat("\t ", 300) + "\ner+2019",
	"wint=\r" + strings.Repeat("x", 130) + "\ner+2019",
	"= \rwint=65r+2019\r\nnext",
	"Account==deadbeef42\r\n",
	"a  \t \r\nb \r \nc\r\r\n",
	"x=4\r\ny=4 \r\nz=4=41\n",
	"end=",
	strings.Repeat("a", 4094) + "=41tail\r\n",
	strings.Repeat("a", 4095) + "=41tail\r\n",
	strings.Repeat("a", 4090) + strings.Repeat(" ", 10) + "b\n",
	strings.Repeat("b", 5000) + "\r\n=41",
}

// randomQP is a random string over the bytes that matter to a
// quoted-printable decoder.
func randomQP(r *rand.Rand) string {
	const alphabet = "==== \t\r\n4aAzZ\x01"
	n := r.IntN(60)
	var b strings.Builder
	for range n {
		if r.IntN(40) == 0 {
			b.WriteString(strings.Repeat(" ", 120+r.IntN(20)))
		}
		b.WriteByte(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

// TestTheGoQuotedPrintableViewReadsAsGoesMimeReaderWhateverTheReads: the
// guard's Go view gives what mime/quotedprintable gives, on adversarial
// and random inputs, cut into two reads at every byte. Where Go's reader
// fails it gives nothing more, and what it gave before is a prefix of the
// view's: the view reads on.
func TestTheGoQuotedPrintableViewReadsAsGoesMimeReaderWhateverTheReads(t *testing.T) {
	inputs := append([]string(nil), adversarialQP...)
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		inputs = append(inputs, randomQP(r))
	}
	failed := 0
	for _, in := range inputs {
		want, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(in)))
		if err != nil {
			failed++
		}
		for cut := 0; cut <= len(in); cut += 1 + len(in)/200 {
			d := &goQP{keep: 1 << 20}
			got := d.endLine(viewAll(d, in, cut), false) // the end of the data: a line without LF
			if err == nil && !bytes.Equal(got, want) || err != nil && !bytes.HasPrefix(got, want) {
				t.Fatalf("%q cut at %d: the view gave %q, mime/quotedprintable %q (%v)", in, cut, got, want, err)
			}
		}
	}
	if failed == 0 || failed == len(inputs) {
		t.Fatalf("%d of %d inputs failed Go's reader: the inputs do not reach both paths", failed, len(inputs))
	}
}

// pythonA2bQP is binascii.a2b_qp's rules (Modules/binascii.c), written
// out on the whole input at once: the reference the streaming view is
// held to.
func pythonA2bQP(in string) string {
	var out []byte
	for i := 0; i < len(in); {
		c := in[i]
		i++
		if c != '=' {
			out = append(out, c)
			continue
		}
		switch {
		case i >= len(in):
		case in[i] == '\n' || in[i] == '\r':
			for in[i] != '\n' && i+1 < len(in) {
				i++
			}
			i++
		case in[i] == '=':
			out, i = append(out, '='), i+1
		case i+1 < len(in) && isHex(in[i]) && isHex(in[i+1]):
			out, i = append(out, unhex(in[i])<<4|unhex(in[i+1])), i+2
		default:
			out = append(out, '=')
		}
	}
	return string(out)
}

// TestThePythonQuotedPrintableViewReadsAsBinasciiA2bQPWhateverTheReads:
// the guard's Python view gives what binascii.a2b_qp gives ('=' CR junk
// LF and "=" LF soft breaks however long, "==" as '=', no trimming), cut
// at every byte; and, where python3 is installed, what Python itself
// gives (skipped without it, except in CI, which installs it).
func TestThePythonQuotedPrintableViewReadsAsBinasciiA2bQPWhateverTheReads(t *testing.T) {
	inputs := append([]string(nil), adversarialQP...)
	r := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		inputs = append(inputs, randomQP(r))
	}
	for in, want := range map[string]string{
		"Account==deadbeef42":  "Account=deadbeef42",
		"= \rwint=65r":         "= \rwinter",
		"wint=\rjunk\ner":      "winter",
		"wint=\ner":            "winter",
		"wint=  \r\ner":        "wint=  \r\ner",
		"a=zb=4=":              "a=zb=4",
		"=4=41":                "=4A",
		"x=3d=3D":              "x==",
		"wint=\r" + "\r\r\ner": "winter",
	} {
		if got := pythonA2bQP(in); got != want {
			t.Fatalf("reference: %q gave %q, want %q", in, got, want)
		}
	}
	for _, in := range inputs {
		want := pythonA2bQP(in)
		for cut := 0; cut <= len(in); cut += 1 + len(in)/200 {
			d := &pythonQP{}
			if got := string(d.flush(viewAll(d, in, cut))); got != want {
				t.Fatalf("%q cut at %d: the view gave %q, a2b_qp %q", in, cut, got, want)
			}
		}
	}
	python := python3(t)
	var all bytes.Buffer
	for _, in := range inputs[:300] {
		all.WriteString(in)
		all.WriteByte(0)
	}
	cmd := exec.Command(python, "-c", `import binascii,sys
for s in sys.stdin.buffer.read().split(b"\0")[:-1]:
    sys.stdout.buffer.write(binascii.a2b_qp(s) + b"\0")`)
	cmd.Stdin, cmd.Stderr = &all, os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	got := bytes.Split(out, []byte{0})
	for i, in := range inputs[:300] {
		if strings.ContainsRune(in, 0) {
			continue
		}
		if want := pythonA2bQP(in); string(got[i]) != want {
			t.Fatalf("%q: python3 gave %q, the rules %q", in, got[i], want)
		}
	}
}

// TestTheUuencodeViewReadsAsPythonsEmailPackage: the uu view gives the
// bytes uuencoded lines carry (lines ended by LF, CR or CRLF; '`' for a
// zero sextet; a short line made up with zero bits; bytes past the
// length skipped), the begin and end lines' garbage around them, cut at
// every byte; and, where python3 is installed, Python's email package
// gives a run of it for a part labelled x-uuencode.
func TestTheUuencodeViewReadsAsPythonsEmailPackage(t *testing.T) {
	secret := "summer+2018\r\nwinter+2019\r\n" + strings.Repeat("long line ", 9)
	var in strings.Builder
	in.WriteString("begin 644 x\r\n")
	for i, rest := 0, []byte(secret); len(rest) > 0; i++ {
		n := min(45, len(rest))
		in.WriteString(uuLine(rest[:n]))
		in.WriteString([]string{"``  \r\n", "\n", "\r"}[i%3]) // bytes past the data; each line ending
		rest = rest[n:]
	}
	in.WriteString("`\r\nend\r\n")
	want := []byte(secret)
	for cut := 0; cut <= in.Len(); cut++ {
		d := &uuView{}
		if got := viewAll(d, in.String(), cut); !bytes.Contains(got, want) {
			t.Fatalf("cut at %d: the view gave %q, not holding %q", cut, got, want)
		}
	}
	// A line cut short: zero bits make up the length (binascii.a2b_uu(b"#86") is 616000).
	if got := (&uuView{}).decode([]byte("#86\n"), nil); !bytes.Equal(got, []byte{0x61, 0x60, 0}) {
		t.Fatalf("a short line gave %x", got)
	}
	// Older Pythons read to LF only: a CR inside a line is a zero sextet.
	if got := (&uuView{lfOnly: true}).decode([]byte("#86\r8\n"), nil); !bytes.Equal(got, []byte{0x61, 0x60, 0x18}) {
		t.Fatalf("lfOnly: %x", got)
	}
	python := python3(t)
	msg := "Content-Type: text/plain\r\nContent-Transfer-Encoding: x-uuencode\r\n\r\n" + in.String()
	cmd := exec.Command(python, "-c", `import email,sys
sys.stdout.buffer.write(email.message_from_bytes(sys.stdin.buffer.read()).get_payload(decode=True))`)
	cmd.Stdin, cmd.Stderr = strings.NewReader(msg), os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := (&uuView{}).decode([]byte(in.String()), nil); !bytes.Contains(out, want) || !bytes.Contains(got, out) {
		t.Fatalf("python3 gave %q; the view %q", out, got)
	}
}

// uuLine is one uuencoded line of b (at most 45 bytes), '`' for zero.
func uuLine(b []byte) string {
	enc := func(v byte) byte {
		if v == 0 {
			return '`'
		}
		return v + 32
	}
	out := []byte{enc(byte(len(b)))}
	b = append(b[:len(b):len(b)], 0, 0)
	for i := 0; i+2 < len(b); i += 3 {
		for _, v := range []byte{b[i] >> 2, (b[i]<<4 | b[i+1]>>4) & 63, (b[i+1]<<2 | b[i+2]>>6) & 63, b[i+2] & 63} {
			out = append(out, enc(v))
		}
	}
	return string(out)
}

// TestALongBlankRunIsShortenedOnlyWhereNoValueCanLie: the Go view keeps a
// blank run longer than twice the longest form as its two ends; every
// run of up to keep bytes of what Go's reader gives that holds a byte
// other than a blank, tab or CR is still in what the view gives.
func TestALongBlankRunIsShortenedOnlyWhereNoValueCanLie(t *testing.T) {
	const keep = 6
	r := rand.New(rand.NewPCG(5, 6))
	for range 400 {
		var in strings.Builder
		for range 1 + r.IntN(8) {
			in.WriteString([]string{"ab", "=41", "c", "=", "=\r\n", "\r\n", "x=4"}[r.IntN(7)])
			for range r.IntN(6 * keep) {
				in.WriteByte(" \t\r"[r.IntN(3)])
			}
		}
		want, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(in.String())))
		d := &goQP{keep: keep}
		got := d.endLine(d.decode([]byte(in.String()), nil), false)
		if err == nil && len(got) > len(want) {
			t.Fatalf("%q: the view gave %q, longer than Go's %q", in.String(), got, want)
		}
		for i := range want {
			for n := 1; n <= keep && i+n <= len(want); n++ {
				w := want[i : i+n]
				if len(bytes.Trim(w, " \t\r")) == 0 {
					continue
				}
				if !bytes.Contains(got, w) {
					t.Fatalf("%q: Go gave %q, the view %q, without %q", in.String(), want, got, w)
				}
			}
		}
	}
}

// python3 finds python3 to compare a view with Python's own decoders: a
// missing one skips locally and fails in CI (scripts/test-prerequisites
// installs it).
func python3(t *testing.T) string {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is missing: the views are compared with Python's decoders in CI")
		}
		t.Skip("python3 not installed: compared with the rules only")
	}
	return python
}

// TestEmptyLinesDoNotMultiplyTheUuencodeViewsOutput: round 42. To the
// view of older Pythons (LF ends a line), a CR is a line's length byte,
// 45: each two-byte empty line CRLF was made up to 45 zero bytes, which
// every matcher and the alphabet view then read, so a body of empty lines
// cost the guard twenty times its plain reading, CPU one integration
// could take from another. A run of made-up zeros is one zero (a value
// holds no NUL), so the output is no longer than the input.
// BenchmarkGuessGuardMIMEEmptyLines measures the cost.
func TestEmptyLinesDoNotMultiplyTheUuencodeViewsOutput(t *testing.T) {
	in := bytes.Repeat([]byte("\r\n"), 1000)
	for _, d := range []*uuView{{}, {lfOnly: true}} {
		if got := d.decode(in, nil); len(got) > len(in) {
			t.Errorf("lfOnly %v: %d bytes of empty lines gave %d", d.lfOnly, len(in), len(got))
		}
	}
	// The bits a short line still holds are given before the zero.
	if got := (&uuView{}).decode([]byte("M86\n"), nil); !bytes.Equal(got, []byte{0x61, 0x60, 0}) {
		t.Fatalf("a line of 45 cut after two characters gave %x", got)
	}
}
