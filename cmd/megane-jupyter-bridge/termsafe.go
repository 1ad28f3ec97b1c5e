package main

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// termSafe makes text that may hold a tool server's or a configuration
// file's strings safe to print on a terminal, as one line: every control
// character (C0 with newline and tab, DEL, C1), every bidirectional
// override or isolate, and every byte that is not UTF-8 is written as a
// visible escape (\x1b, \n, \u202e, \xff), the way the log quotes the same
// strings. A server named "x\x1b[2K\r…\nok: forged" cannot erase a line,
// retitle the terminal or forge a finding of its own.
func termSafe(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r < 0xa0, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
