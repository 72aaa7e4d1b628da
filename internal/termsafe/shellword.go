package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ShellWord quotes s for a shell when it holds anything but plain path
// characters: every command egressd prints is printed to be pasted, so
// pasting must give the program s's bytes exactly. A word holding a
// backslash, invalid UTF-8, or a character that does not print or that
// String shows escaped (a control, a format or blank character) is
// written in ANSI-C quoting ($'…' with an octal \NNN for each such byte),
// which bash, zsh, ksh93, busybox sh and POSIX.1-2024 sh read (dash before
// 0.5.13 does not). Its output is ASCII with no \x or \u in it, so
// termsafe passes it as it is: shown as \u3164 inside '…', a Hangul filler
// would name another folder, literally "\u3164".
func ShellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-:+@,=") == "" {
		return s
	}
	if strings.ContainsRune(s, '\\') || !utf8.ValidString(s) || !Clean(s) || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		var b strings.Builder
		b.WriteString("$'")
		for i := 0; i < len(s); i++ {
			switch c := s[i]; {
			case c == '\\' || c == '\'' || c < 0x20 || c >= 0x7f:
				fmt.Fprintf(&b, "\\%03o", c)
			default:
				b.WriteByte(c)
			}
		}
		return b.String() + "'"
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
