package bridge

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"unicode/utf8"
)

// jsonScan checks JSON text fed in pieces, as it arrives, and gives the
// verdict encoding/json.Valid gives on the whole text (nesting deeper than
// 10000 is invalid there too). It keeps nothing of the text but its open
// containers and, for a streamed response, the few bytes it watches: where
// the line's "result" value ends, the keys after it, and the result's
// top-level "isError" and "resultType". The zero value checks a text
// watching nothing; the caller guards it.
type jsonScan struct {
	off   int64  // the bytes fed so far
	stack []byte // the open containers, '{' or '['
	state uint8
	key   bool   // the string being read is an object key
	lit   string // sLit: the literal's bytes still expected
	hex   int    // sHex: hex digits still expected
	err   error  // sticky

	// Watching (set resultAt before the first feed; -1 or 0 watches nothing).
	resultAt  int64     // where the line's "result" value starts
	resultEnd int64     // where it ended (the offset after its last byte); 0 until then
	capDepth  int       // the depth of the key being captured, 0 for none
	capKey    []byte    // the key being read at depth 1 or 2 (up to 16 bytes)
	lastKey   [3][]byte // by depth: the last key read
	valDepth  int       // the depth of the scalar value being captured, 0 for none
	val       []byte    // its raw bytes (up to 32)
	isError   bool      // the result's top-level "isError" is true
	inputReq  bool      // the result's top-level "resultType" is "input_required"
	repeated  string    // a key after the result that repeats one the response has: "result", "error", "id" or "method"
}

const (
	sValue        = iota // a value is expected
	sValueOrClose        // after '[': a value or ']'
	sKeyOrClose          // after '{': a key or '}'
	sKey                 // after ',' in an object: a key
	sColon               // after a key
	sCommaOrClose        // after a value in a container
	sEnd                 // the top-level value is complete: only white space
	sString
	sEsc
	sHex
	sLit
	sNeg   // '-'
	sZero  // a leading 0
	sInt   // integer digits
	sDot   // '.'
	sFrac  // fraction digits
	sE     // 'e' or 'E'
	sESign // the exponent's sign
	sExp   // exponent digits
)

// jsonMaxDepth is encoding/json's nesting limit.
const jsonMaxDepth = 10000

var errJSONEnd = errors.New("unexpected end of JSON input")

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// fail records the first error, at the byte offset at.
func (s *jsonScan) fail(c byte, at int64, what string) {
	if s.err == nil {
		s.err = fmt.Errorf("invalid character %q %s at byte %d", c, what, at)
	}
}

// feed checks the next piece of the text; the verdict so far is s.err.
// The common runs (a string's plain bytes, a number's digits, white
// space) are skipped in tight loops: a 40 MB result of numbers is checked
// at several hundred MB/s.
func (s *jsonScan) feed(p []byte) error {
	n := len(p)
	for i := 0; i < n && s.err == nil; {
		c := p[i]
		switch s.state {
		case sString:
			if s.capDepth == 0 && s.valDepth == 0 {
				for i < n && p[i] >= 0x20 && p[i] != '"' && p[i] != '\\' {
					i++
				}
				if i == n {
					continue
				}
				c = p[i]
			}
			s.capture(c)
			switch {
			case c == '"':
				s.endString(s.off + int64(i))
			case c == '\\':
				s.state = sEsc
			case c < 0x20:
				s.fail(c, s.off+int64(i), "in string literal")
			}
			i++
		case sEsc:
			s.capture(c)
			switch c {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.state = sString
			case 'u':
				s.state, s.hex = sHex, 4
			default:
				s.fail(c, s.off+int64(i), "in string escape code")
			}
			i++
		case sHex:
			s.capture(c)
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				s.fail(c, s.off+int64(i), "in \\u hexadecimal character escape")
			} else if s.hex--; s.hex == 0 {
				s.state = sString
			}
			i++
		case sLit:
			s.capture(c)
			if c != s.lit[0] {
				s.fail(c, s.off+int64(i), "in literal")
			} else if s.lit = s.lit[1:]; s.lit == "" {
				s.valueDone(s.off + int64(i) + 1)
			}
			i++
		case sInt, sFrac, sExp:
			if s.valDepth == 0 {
				for k := i; i < n && '0' <= p[i] && p[i] <= '9'; i++ {
					if i-k == 4 {
						i = skipDigits8(p, i)
						break
					}
				}
				if i == n {
					continue
				}
				c = p[i]
				if c == '.' && s.state == sInt {
					s.state = sDot
					i++
					continue
				}
				if (c == ',' || c == ']' || c == '}') && len(s.stack) > 1 {
					// The number ended inside a container below the top
					// level, where nothing watches values (valueDone).
					s.state = sCommaOrClose
					continue
				}
			}
			fallthrough
		case sNeg, sZero, sDot, sE, sESign:
			if s.valDepth == 0 && '0' <= c && c <= '9' && (s.state == sDot || s.state == sNeg && c != '0') {
				// The common steps of a number, without a call.
				if s.state == sDot {
					s.state = sFrac
				} else {
					s.state = sInt
				}
				i++
				continue
			}
			if s.number(c, s.off+int64(i)) {
				s.capture(c)
				i++
			}
			// Else the number ended before c: c is read again after it.
		default:
			for isSpace(c) {
				if i++; i == n {
					break
				}
				c = p[i]
			}
			if i == n {
				continue
			}
			// A run of numbers in a container below the result's top
			// level, each with what follows it, in one tight loop.
			if (s.state == sValue || s.state == sValueOrClose) && len(s.stack) > 2 && s.valDepth == 0 && (c == '-' || '0' <= c && c <= '9') {
				if j := s.numbers(p, i); j > i {
					i = j
					continue
				}
			}
			// The common structural steps, without a call: a comma, and
			// the start of a number or an array away from the result's
			// top level (where startValue watches values).
			switch {
			case s.state == sCommaOrClose && c == ']' && s.stack[len(s.stack)-1] == '[' && len(s.stack) > 2 && s.valDepth == 0:
				// An array closed below the result's top level (close).
				s.stack = s.stack[:len(s.stack)-1]
				i++
				continue
			case s.state == sCommaOrClose && c == ',':
				if s.stack[len(s.stack)-1] == '[' {
					s.state = sValue
				} else {
					s.state = sKey
				}
				i++
				continue
			case (s.state == sValue || s.state == sValueOrClose) && len(s.stack) != 2 && s.valDepth == 0:
				switch {
				case '1' <= c && c <= '9':
					s.state = sInt
					i++
					continue
				case c == '-':
					s.state = sNeg
					i++
					continue
				case c == '[' && len(s.stack) < jsonMaxDepth:
					s.stack = append(s.stack, '[')
					s.state = sValueOrClose
					i++
					continue
				}
			}
			s.structural(c, s.off+int64(i))
			i++
		}
	}
	s.off += int64(n)
	return s.err
}

// numbers reads, from p[i], where a value is expected in a container
// below the result's top level (where nothing watches values), numbers
// and what follows each: a comma, the container's close, or white space.
// It stops before a number that runs to the end of p or is not valid, or
// is followed by anything else, leaving that to the state machine, and
// returns where it stopped (i when it read nothing).
func (s *jsonScan) numbers(p []byte, i int) int {
	n := len(p)
	for {
		j := numberEnd(p, i)
		if j < 0 {
			return i
		}
		top := s.stack[len(s.stack)-1]
		switch c := p[j]; {
		case c == ',' && top == '[':
			s.state = sValue
			j++
			for j < n && isSpace(p[j]) {
				j++
			}
			if j == n || p[j] != '-' && (p[j] < '0' || p[j] > '9') {
				return j
			}
			i = j // the next number
		case c == ',':
			s.state = sKey
			return j + 1
		case c == ']' && top == '[', c == '}' && top == '{':
			// close, below the result's top level: nothing to note.
			s.stack = s.stack[:len(s.stack)-1]
			s.state = sCommaOrClose
			return j + 1
		case isSpace(c):
			s.state = sCommaOrClose
			return j
		default:
			return i
		}
	}
}

// numberEnd returns the index after the valid JSON number starting at
// p[i], or -1 when there is none there or it runs to the end of p (it may
// go on in the next piece).
func numberEnd(p []byte, i int) int {
	n := len(p)
	if i < n && p[i] == '-' {
		i++
	}
	if i >= n {
		return -1
	}
	switch c := p[i]; {
	case c == '0':
		i++
	case '1' <= c && c <= '9':
		i++
		for k := i; i < n && '0' <= p[i] && p[i] <= '9'; i++ {
			if i-k == 4 {
				i = skipDigits8(p, i)
				break
			}
		}
	default:
		return -1
	}
	if i < n && p[i] == '.' {
		i++
		start := i
		for k := i; i < n && '0' <= p[i] && p[i] <= '9'; i++ {
			if i-k == 4 {
				i = skipDigits8(p, i)
				break
			}
		}
		if i == start {
			return -1
		}
	}
	if i < n && (p[i] == 'e' || p[i] == 'E') {
		i++
		if i < n && (p[i] == '+' || p[i] == '-') {
			i++
		}
		start := i
		for k := i; i < n && '0' <= p[i] && p[i] <= '9'; i++ {
			if i-k == 4 {
				i = skipDigits8(p, i)
				break
			}
		}
		if i == start {
			return -1
		}
	}
	if i >= n {
		return -1
	}
	return i
}

// skipDigits8 returns the index of the first byte from p[i] on that is
// not an ASCII digit (len(p) if none), eight bytes at a time: a byte b is
// a digit when b&0xF0 and (b+6)&0xF0 are both 0x30 (adding 6 carries into
// the next byte only from a byte that is no digit, so the first such byte
// is found whatever follows it). The callers read the first four digits
// of a run themselves: most runs (an index, a count) end there, and a
// long one (a coordinate has 16 digits or so) is worth the call. That
// loop is written out at each of its four places on purpose: as a
// function it is over the inliner's budget (cost 89 to 108 of 80 in
// every form tried), and a call per run cost short numbers 23 %
// (BenchmarkJSONScan/short: 790 -> 610 MB/s).
func skipDigits8(p []byte, i int) int {
	const high, zeros, sixes = 0xF0F0F0F0F0F0F0F0, 0x3030303030303030, 0x0606060606060606
	for i+8 <= len(p) {
		x := binary.LittleEndian.Uint64(p[i:])
		if m := (x&high ^ zeros) | ((x+sixes)&high ^ zeros); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	for i < len(p) && '0' <= p[i] && p[i] <= '9' {
		i++
	}
	return i
}

// number advances a number by c and reports whether c belongs to it; if
// not, the number is complete (or invalid, recorded).
func (s *jsonScan) number(c byte, at int64) bool {
	digit := '0' <= c && c <= '9'
	switch s.state {
	case sNeg:
		switch {
		case c == '0':
			s.state = sZero
		case digit:
			s.state = sInt
		default:
			s.fail(c, at, "in numeric literal")
		}
		return true
	case sZero, sInt:
		switch {
		case digit && s.state == sInt:
			return true
		case c == '.':
			s.state = sDot
			return true
		case c == 'e' || c == 'E':
			s.state = sE
			return true
		}
	case sDot:
		if !digit {
			s.fail(c, at, "after decimal point in numeric literal")
		}
		s.state = sFrac
		return true
	case sFrac:
		switch {
		case digit:
			return true
		case c == 'e' || c == 'E':
			s.state = sE
			return true
		}
	case sE:
		switch {
		case c == '+' || c == '-':
			s.state = sESign
		case digit:
			s.state = sExp
		default:
			s.fail(c, at, "in exponent of numeric literal")
		}
		return true
	case sESign:
		if !digit {
			s.fail(c, at, "in exponent of numeric literal")
		}
		s.state = sExp
		return true
	case sExp:
		if digit {
			return true
		}
	}
	s.valueDone(at)
	return false
}

// structural reads c outside strings, literals and numbers.
func (s *jsonScan) structural(c byte, at int64) {
	if isSpace(c) {
		return
	}
	switch s.state {
	case sEnd:
		s.fail(c, at, "after top-level value")
		return
	case sColon:
		if c != ':' {
			s.fail(c, at, "after object key")
			return
		}
		s.state = sValue
		return
	case sKeyOrClose, sKey:
		switch {
		case c == '"':
			s.state, s.key = sString, true
			if d := len(s.stack); d <= 2 && s.watching(at) {
				s.capDepth, s.capKey = d, append(s.capKey[:0], '"')
			}
		case c == '}' && s.state == sKeyOrClose:
			s.close(at)
		default:
			s.fail(c, at, "looking for beginning of object key string")
		}
		return
	case sCommaOrClose:
		top := s.stack[len(s.stack)-1]
		switch {
		case c == ',' && top == '{':
			s.state = sKey
		case c == ',':
			s.state = sValue
		case c == '}' && top == '{', c == ']' && top == '[':
			s.close(at)
		default:
			what := "after array element"
			if top == '{' {
				what = "after object key:value pair"
			}
			s.fail(c, at, what)
		}
		return
	}
	// sValue or sValueOrClose
	if c == ']' && s.state == sValueOrClose {
		s.close(at)
		return
	}
	s.startValue(at)
	switch {
	case c == '{' || c == '[':
		s.stack = append(s.stack, c)
		if len(s.stack) > jsonMaxDepth {
			s.fail(c, at, "exceeding the maximum depth")
			return
		}
		if c == '{' {
			s.state = sKeyOrClose
		} else {
			s.state = sValueOrClose
		}
	case c == '"':
		s.state, s.key = sString, false
		s.capture(c)
	case c == '-':
		s.state = sNeg
		s.capture(c)
	case c == '0':
		s.state = sZero
		s.capture(c)
	case '1' <= c && c <= '9':
		s.state = sInt
		s.capture(c)
	case c == 't':
		s.state, s.lit = sLit, "rue"
		s.capture(c)
	case c == 'f':
		s.state, s.lit = sLit, "alse"
		s.capture(c)
	case c == 'n':
		s.state, s.lit = sLit, "ull"
		s.capture(c)
	default:
		s.fail(c, at, "looking for beginning of value")
	}
}

// close ends the innermost container, whose closing bracket is at at.
func (s *jsonScan) close(at int64) {
	s.stack = s.stack[:len(s.stack)-1]
	s.valueDone(at + 1)
}

// valueDone notes that a value ended before offset end.
func (s *jsonScan) valueDone(end int64) {
	d := len(s.stack)
	if s.valDepth != 0 && s.valDepth == d {
		s.judge(d)
		s.valDepth = 0
	}
	if d == 1 && s.resultAt > 0 && s.resultEnd == 0 && end > s.resultAt {
		s.resultEnd = end
	}
	if d == 0 {
		s.state = sEnd
	} else {
		s.state = sCommaOrClose
	}
}

// endString ends the string whose closing quote is at at.
func (s *jsonScan) endString(at int64) {
	if !s.key {
		s.valueDone(at + 1)
		return
	}
	s.key = false
	s.state = sColon
	if d := s.capDepth; d != 0 {
		s.lastKey[d] = append(s.lastKey[d][:0], s.capKey...)
		s.capDepth = 0
		if d == 1 && s.resultEnd > 0 {
			switch k := string(s.capKey); k {
			case `"result"`, `"error"`, `"id"`, `"method"`:
				if s.repeated == "" {
					s.repeated = k
				}
			}
		}
	}
}

// watching reports whether the bytes at at are of interest: the result
// and what follows it.
func (s *jsonScan) watching(at int64) bool { return s.resultAt > 0 && at >= s.resultAt }

// startValue notes a value starting at at: a scalar of the result's top
// level under a watched key is captured.
func (s *jsonScan) startValue(at int64) {
	if d := len(s.stack); d == 2 && s.watching(at) && s.resultEnd == 0 {
		switch string(s.lastKey[2]) {
		case `"isError"`, `"resultType"`:
			s.valDepth, s.val = d, s.val[:0]
		}
	}
}

// capture keeps c when a watched key or value is being read.
func (s *jsonScan) capture(c byte) {
	if s.key {
		if s.capDepth != 0 && len(s.capKey) < 16 {
			s.capKey = append(s.capKey, c)
		}
		return
	}
	if s.valDepth != 0 && len(s.val) < 32 {
		s.val = append(s.val, c)
	}
}

// judge reads a captured value of the result's top level.
func (s *jsonScan) judge(d int) {
	switch string(s.lastKey[d]) {
	case `"isError"`:
		s.isError = string(s.val) == "true"
	case `"resultType"`:
		s.inputReq = string(s.val) == `"input_required"`
	}
}

// end gives the verdict once the text is over.
func (s *jsonScan) end() error {
	if s.err != nil {
		return s.err
	}
	switch s.state {
	case sEnd:
		return nil
	case sZero, sInt, sFrac, sExp:
		if len(s.stack) == 0 {
			s.valueDone(s.off)
			return nil
		}
	}
	s.err = errJSONEnd
	return s.err
}

// utf8Stream checks text fed in pieces for valid UTF-8, carrying a
// character cut between two pieces.
type utf8Stream struct {
	off   int64   // the bytes fed before carry
	carry [4]byte // the start of a character cut at the end of the last piece
	n     int
	bad   int64 // the offset of the first invalid byte, or -1
}

func newUTF8Stream() utf8Stream { return utf8Stream{bad: -1} }

// feed checks p; it returns false once an invalid byte was seen (at bad).
func (u *utf8Stream) feed(p []byte) bool {
	if u.bad >= 0 {
		return false
	}
	for u.n > 0 && len(p) > 0 {
		u.carry[u.n] = p[0]
		u.n++
		p = p[1:]
		if utf8.FullRune(u.carry[:u.n]) {
			if r, size := utf8.DecodeRune(u.carry[:u.n]); r == utf8.RuneError && size == 1 {
				u.bad = u.off
				return false
			}
			u.off += int64(u.n)
			u.n = 0
		}
	}
	if len(p) == 0 {
		return true
	}
	if utf8.Valid(p) {
		u.off += int64(len(p))
		return true
	}
	// Find the invalid byte, or a character cut at the end.
	for i := 0; i < len(p); {
		if p[i] < utf8.RuneSelf {
			i++
			continue
		}
		if !utf8.FullRune(p[i:]) {
			u.n = copy(u.carry[:], p[i:])
			u.off += int64(i)
			return true
		}
		r, size := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && size == 1 {
			u.bad = u.off + int64(i)
			return false
		}
		i += size
	}
	u.off += int64(len(p))
	return true
}

// end reports whether the text ended valid: no character left cut.
func (u *utf8Stream) end() bool {
	if u.bad >= 0 {
		return false
	}
	if u.n > 0 {
		u.bad = u.off
		return false
	}
	return true
}
