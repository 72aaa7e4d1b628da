package termsafe

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// Text returns a writer for a hostile program's output on its way to a
// terminal. Line feeds, tabs and CR LF pass; every other control (an escape
// sequence that switches to the alternate screen, hides the cursor, turns on
// mouse reporting, sets the clipboard with OSC 52 or retitles the window; a
// lone CR that paints over a line) is escaped as String escapes it, so the
// program can neither change the terminal's state nor forge what the user
// reads. A UTF-8 sequence or CR cut by a write boundary waits for the next
// write; Flush writes what is still held, escaped.
func Text(w io.Writer) *TextWriter { return &TextWriter{w: w} }

// TextWriter is the writer Text returns.
type TextWriter struct {
	w    io.Writer
	held []byte // the start of a rune, or a CR, cut by the end of a write
	out  []byte
}

func (t *TextWriter) Write(p []byte) (int, error) {
	b := append(t.held, p...)
	t.out = t.out[:0]
	i := 0
	for i < len(b) {
		c := b[i]
		if c == '\r' {
			if i+1 == len(b) {
				break // CR LF, or a lone CR: the next write tells
			}
			if b[i+1] == '\n' {
				t.out = append(t.out, '\r', '\n')
				i += 2
				continue
			}
		}
		if c == '\n' || c == '\t' {
			t.out = append(t.out, c)
			i++
			continue
		}
		if !utf8.FullRune(b[i:]) {
			break
		}
		i += t.escape(b[i:])
	}
	t.held = append(t.held[:0], b[i:]...)
	if _, err := t.w.Write(t.out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// escape appends b's first rune to t.out, escaped if a terminal would act
// on it, and returns its length.
func (t *TextWriter) escape(b []byte) int {
	r, size := utf8.DecodeRune(b)
	switch {
	case r == utf8.RuneError && size == 1:
		t.out = fmt.Appendf(t.out, `\x%02x`, b[0])
	case r < 0x80 && unsafeRune(r):
		t.out = fmt.Appendf(t.out, `\x%02x`, r)
	case unsafeRune(r):
		t.out = fmt.Appendf(t.out, `\u%04x`, r)
	default:
		t.out = append(t.out, b[:size]...)
	}
	return size
}

// Flush writes what a write boundary still holds (an unfinished rune, a
// trailing CR), escaped: at the end of the stream nothing completes it.
func (t *TextWriter) Flush() error {
	t.out = t.out[:0]
	for b := t.held; len(b) > 0; {
		b = b[t.escape(b):]
	}
	t.held = t.held[:0]
	if len(t.out) == 0 {
		return nil
	}
	_, err := t.w.Write(t.out)
	return err
}
