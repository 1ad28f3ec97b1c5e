package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// scanPieces runs jsonScan over data cut at the given points.
func scanPieces(data []byte, cuts ...int) (*jsonScan, error) {
	s := &jsonScan{}
	prev := 0
	for _, c := range cuts {
		if c < prev || c > len(data) {
			continue
		}
		s.feed(data[prev:c])
		prev = c
	}
	s.feed(data[prev:])
	return s, s.end()
}

func TestJSONScanAgreesWithEncodingJSON(t *testing.T) {
	deep := strings.Repeat("[", jsonMaxDepth) + strings.Repeat("]", jsonMaxDepth)
	tooDeep := strings.Repeat("[", jsonMaxDepth+1) + strings.Repeat("]", jsonMaxDepth+1)
	for _, text := range []string{
		``, ` `, `{}`, `[]`, `[`, `]`, `{"a":1}`, `{"a":1,}`, `[1,]`, `[1 2]`, `{"a" 1}`, `{1:2}`,
		`0`, `-`, `-0`, `01`, `1.`, `1.5`, `1e`, `1e+`, `1e+5`, `1E-05`, `-12.5e3`, `.5`, `+1`,
		`true`, `tru`, `truex`, `null`, `nul`, `false `, ` "x" `, `"x`, `"\u00e9"`, `"\u00g9"`, `"\q"`,
		"\"a\tb\"", `"a\/b"`, `"` + "\x7f" + `"`, "\"\xff\"", `{"a":[1,{"b":null}],"c":"d"}`, `{"a":1}x`,
		`[[[]]]`, `[[[]]`, deep, tooDeep, `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`,
	} {
		want := json.Valid([]byte(text))
		for _, cut := range []int{0, 1, len(text) / 2, len(text) - 1} {
			if _, err := scanPieces([]byte(text), cut); (err == nil) != want {
				t.Errorf("%.40q cut at %d: scan says %v, encoding/json says valid=%v", text, cut, err, want)
			}
		}
	}
}

// TestJSONScanNumberRuns: runs of numbers deep in the text (read in one
// tight loop) get encoding/json's verdict wherever the text is cut.
func TestJSONScanNumberRuns(t *testing.T) {
	var texts []string
	for _, num := range []string{`0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1E-05`, `-12.5e3`, `+1`, `1x`, `0.0e0`, `12345678901234567890`,
		// Long runs, read eight digits at a time, ended by what is no digit
		// at each place of an eight-byte word (':' and '/' border the
		// digits; 0xFA and up would carry when 6 is added).
		`1.2345678901234567`, `123456789012.5e-123456789`, `1234567:89`, `12345678/9`, "123456789\xfa1", "1.23456\xff789", `1.123456789012345x`} {
		for _, form := range []string{`[[[X]]]`, `[[[1,X]]]`, `[[[X,2 ]]]`, `[[[X , 3]]]`, "[[[\tX\n]]]", `{"a":{"b":{"c":X,"d":[X,X]}}}`, `{"a":{"b":{"c":X}}}`, `[[[X}]]`, `{"a":{"b":{"c":X]}}`, `[[[X,]]]`, `[[[X,,1]]]`, `[[[X X]]]`, `[[[X"a"]]]`} {
			texts = append(texts, strings.ReplaceAll(form, "X", num))
		}
	}
	for _, text := range texts {
		want := json.Valid([]byte(text))
		for cut := 0; cut <= len(text); cut++ {
			if _, err := scanPieces([]byte(text), cut); (err == nil) != want {
				t.Errorf("%q cut at %d: scan says %v, encoding/json says valid=%v", text, cut, err, want)
			}
		}
	}
}

func TestJSONScanWatchesTheResult(t *testing.T) {
	for _, tc := range []struct {
		line               string
		isError, inputReq  bool
		repeated, resultIs string
	}{
		{line: `{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}`, isError: true, resultIs: `{"content":[],"isError":true}`},
		{line: `{"jsonrpc":"2.0","id":1,"result":{"content":[{"isError":true}],"isError":false}}`, resultIs: `{"content":[{"isError":true}],"isError":false}`},
		{line: `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required"} }`, inputReq: true, resultIs: `{"resultType":"input_required"}`},
		{line: `{"jsonrpc":"2.0","id":1,"result":12.5,"x":{"isError":true}}`, resultIs: `12.5`},
		{line: `{"jsonrpc":"2.0","id":1,"result":"a","result":"b"}`, repeated: `"result"`, resultIs: `"a"`},
		{line: `{"jsonrpc":"2.0","id":1,"result":null ,"error":{}}`, repeated: `"error"`, resultIs: `null`},
		{line: `{"jsonrpc":"2.0","id":1,"result":{"a":[[1.5,-2],[3e2,[4,[]]]],"isError":true,"b":[[0]]},"x":[[1]]}`, isError: true, resultIs: `{"a":[[1.5,-2],[3e2,[4,[]]]],"isError":true,"b":[[0]]}`},
		{line: `{"jsonrpc":"2.0","id":1,"result":[[1,2],[3]],"x":[[1],2]}`, resultIs: `[[1,2],[3]]`},
		{line: `{"jsonrpc":"2.0","id":1,"result":[1,-2.5e3]}`, resultIs: `[1,-2.5e3]`},
	} {
		at := int64(strings.Index(tc.line, `"result":`) + len(`"result":`))
		for cut := 0; cut <= len(tc.line); cut++ {
			s := &jsonScan{resultAt: at}
			s.feed([]byte(tc.line[:cut]))
			s.feed([]byte(tc.line[cut:]))
			if err := s.end(); err != nil {
				t.Fatalf("%s: %v", tc.line, err)
			}
			got := tc.line[at:s.resultEnd]
			if got != tc.resultIs || s.isError != tc.isError || s.inputReq != tc.inputReq || s.repeated != tc.repeated {
				t.Fatalf("%s cut at %d: result %q isError %v inputRequired %v repeated %q", tc.line, cut, got, s.isError, s.inputReq, s.repeated)
			}
		}
	}
}

// FuzzJSONScan holds the streaming validator to encoding/json's verdict
// on the whole text, wherever the text is cut, and its UTF-8 companion to
// utf8.Valid.
func FuzzJSONScan(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":"c\u00e9"}]}`, `[1e5,-0.5,true,false,null]`, "\"\xe2\x82\xac\"", `{"a":}`, "\"\xe2\x82\"", `01`} {
		f.Add([]byte(s), uint16(3), uint16(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, c1, c2 uint16) {
		a, b := int(c1)%(len(data)+1), int(c2)%(len(data)+1)
		if a > b {
			a, b = b, a
		}
		_, err := scanPieces(data, a, b)
		if want := json.Valid(data); (err == nil) != want {
			t.Fatalf("%q cut at %d, %d: scan says %v, encoding/json says valid=%v", data, a, b, err, want)
		}
		u := newUTF8Stream()
		ok := u.feed(data[:a]) && u.feed(data[a:b]) && u.feed(data[b:])
		ok = ok && u.end()
		if ok != utf8.Valid(data) {
			t.Fatalf("%q cut at %d, %d: utf8Stream says %v", data, a, b, ok)
		}
		if !ok && u.bad != int64(firstInvalid(data)) {
			t.Fatalf("%q: first invalid byte %d, utf8Stream says %d", data, firstInvalid(data), u.bad)
		}
	})
}

func firstInvalid(p []byte) int {
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && n == 1 {
			if !utf8.FullRune(p[i:]) && bytes.IndexFunc(p[i:], func(rune) bool { return false }) < 0 {
				return i
			}
			return i
		}
		i += n
	}
	return len(p)
}

// BenchmarkJSONScan: the streaming check of a 40 MB result shaped like
// the atoms tool's (arrays of numbers, short strings), against
// encoding/json.Valid on the whole and utf8.Valid.
func BenchmarkJSONScan(b *testing.B) {
	// Short numbers (indices, three-digit coordinates), and full-precision
	// coordinates as a structure tool writes them (the atoms tool's
	// positions): 40 MB of each.
	for _, kind := range []string{"short", "floats"} {
		b.Run(kind, func(b *testing.B) { benchmarkJSONScan(b, jsonScanBenchData(kind)) })
	}
}

func jsonScanBenchData(kind string) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"jsonrpc":"2.0","id":7,"result":{"structuredContent":{"positions":[`)
	rng := rand.New(rand.NewPCG(7, 7))
	var num []byte
	for i := 0; buf.Len() < 40e6; i++ {
		if i > 0 {
			buf.WriteByte(',')
		}
		if kind == "short" {
			fmt.Fprintf(&buf, `[%d.%03d,-%d.%03d,%d.5e-3]`, i%97, i%1000, i%13, (i*7)%1000, i%11)
		} else {
			num = strconv.AppendFloat(num[:0], rng.Float64()*80, 'g', -1, 64)
			buf.Write(num)
		}
	}
	buf.WriteString(`],"names":["O","H","H"]}}}`)
	return buf.Bytes()
}

func benchmarkJSONScan(b *testing.B, data []byte) {
	b.Run("jsonScan", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			s := &jsonScan{resultAt: 33}
			for p := data; len(p) > 0; {
				n := min(len(p), 1<<20)
				s.feed(p[:n])
				p = p[n:]
			}
			if s.end() != nil {
				b.Fatal(s.err)
			}
		}
	})
	b.Run("utf8Stream", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			u := newUTF8Stream()
			for p := data; len(p) > 0; {
				n := min(len(p), 1<<20)
				u.feed(p[:n])
				p = p[n:]
			}
		}
	})
	b.Run("encoding/json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			json.Valid(data)
		}
	})
}

// FuzzParseResultHead: whatever a server's line starts with, a head the
// stream takes is the start of a JSON-RPC response with that id, whose
// result starts where it says.
func FuzzParseResultHead(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"result":`, ` { "id" : "a" , "jsonrpc" : "2.0" , "result" :  {`, `{"jsonrpc":"2.0","result":1,"id":2}`, `{"id":-7,"jsonrpc":"2.0","result":[`, `{"jsonrpc":"2.0","id":01,"result":`, `{"jsonrpc":"2.0","id":-,"result":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, head []byte) {
		id, at, ok := parseResultHead(head)
		if !ok {
			return
		}
		whole := append(append([]byte{}, head[:at]...), `null}`...)
		var m struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(whole, &m); err != nil || m.JSONRPC != "2.0" || string(m.ID) != string(id) || string(m.Result) != "null" {
			t.Fatalf("head %q taken (id %q, result at %d), but %q reads as %+v, %v", head, id, at, whole, m, err)
		}
	})
}
