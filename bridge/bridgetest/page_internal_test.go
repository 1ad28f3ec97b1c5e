package bridgetest

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzAppendUnquoted: the page client's unescaping of a chunk's data gives
// what encoding/json gives for every valid JSON string literal.
func FuzzAppendUnquoted(f *testing.F) {
	for _, s := range []string{`""`, `"abc"`, `"a\"b\\c\/d\n\r\t\b\f"`, `"\u00e9\u4e2d"`, `"\ud83d\ude00"`,
		`"\ud83d"`, `"\ude00x"`, `"\ud83d\u0041"`, `"\ud83dx\ude00"`, "\"\xc3\xa9\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, lit []byte) {
		lit = bytes.Trim(lit, " \t\r\n") // a raw value never has the spaces around it
		var want string
		if json.Unmarshal(lit, &want) != nil || len(lit) == 0 || lit[0] != '"' {
			return // not a JSON string literal: the client parses the frame first
		}
		got, err := appendUnquoted([]byte("x"), lit)
		if !utf8.Valid(lit) {
			if err == nil {
				t.Fatalf("%q: bytes that are not UTF-8 were taken", lit)
			}
			return
		}
		if err != nil {
			t.Fatalf("%q: %v", lit, err)
		}
		if !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Fatalf("%q: got %q, want %q", lit, got[1:], want)
		}
	})
}
