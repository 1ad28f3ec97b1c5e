package stdio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// msgReader turns a server's stdout into JSON-RPC messages: one message per
// line, skipping lines that are not JSON objects or not valid JSON-RPC, and
// replacing a response over the size limit by an error response for its id.
// It is owned by one goroutine.
type msgReader struct {
	r      io.Reader
	max    int64
	filter func([]byte) []byte
	stream func(head []byte) LineSink // Options.StreamLine; may be nil
	log    *slog.Logger

	buf      []byte // read buffer of readChunk bytes; buf[pos:end] is unconsumed
	pos, end int
	err      error // sticky error from r, returned once buf is drained
}

func newMsgReader(r io.Reader, max int64, filter func([]byte) []byte, log *slog.Logger) *msgReader {
	return &msgReader{r: r, max: max, filter: filter, log: log, buf: make([]byte, readChunk)}
}

// oversize describes a line longer than the limit, which was discarded.
type oversize struct {
	size int64
	scan topScanner
}

// next returns the next message, or the read error (io.EOF at the end).
func (m *msgReader) next() (jsonrpc.Message, error) {
	for {
		line, big, err := m.readLine()
		if err != nil {
			return nil, err
		}
		var msg jsonrpc.Message
		if big != nil {
			msg = m.tooLarge(big)
		} else {
			msg = m.decode(line)
		}
		if msg != nil {
			return msg, nil
		}
		// A line dropped (a progress notification the filter routed, or
		// junk): nothing parks this loop while the server keeps writing,
		// so it yields, or a server flooding notifications would hold a
		// processor for a whole time slice (10 ms) at a time, and every
		// other session's and page's goroutines would wait behind it.
		runtime.Gosched()
	}
}

// decode decodes one complete line, or logs why it is skipped and returns nil.
func (m *msgReader) decode(line []byte) jsonrpc.Message {
	data := bytes.TrimSpace(line)
	if len(data) == 0 {
		m.log.Debug("skipping a blank line on the server's stdout")
		return nil
	}
	if data[0] != '{' {
		m.log.Warn("skipping a line on the server's stdout that is not a JSON-RPC message", "line", logLine(data))
		return nil
	}
	if m.filter != nil {
		data = m.filter(data)
		if len(data) == 0 {
			return nil
		}
	}
	msg, err := decodeJSONRPC(data)
	if req, ok := msg.(*jsonrpc.Request); err == nil && ok && req.Method == "" {
		err = errors.New("a request without a method") // go-sdk accepts "method": null
	}
	if err != nil {
		// A response a JSON decoder cannot read at all (too deep, say)
		// fails its request; readable JSON that is not valid JSON-RPC is
		// skipped like any junk.
		if id, ok := responseID(data); ok && !json.Valid(data) {
			m.log.Warn("a response on the server's stdout could not be decoded: failing its request", "size", len(data), "error", err)
			return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{
				Code:    CodeUnreadable,
				Message: fmt.Sprintf("its response of %d bytes could not be read: %v", len(data), err),
			}}
		}
		m.log.Warn("skipping an invalid JSON-RPC message on the server's stdout", "line", logLine(data), "error", err)
		return nil
	}
	return msg
}

// responseID returns the id of a message that looks like a response (an
// object with "jsonrpc" and "result" or "error", without "method") and whose top-level id is a string or an
// integer, read without decoding the rest, however large or deep.
func responseID(parts ...[]byte) (jsonrpc.ID, bool) {
	var s topScanner
	for _, p := range parts {
		s.feed(p)
	}
	if !s.object || s.hasMethod || !s.hasResult || !s.hasJSONRPC {
		return jsonrpc.ID{}, false
	}
	return s.id()
}

// ResponseID returns the raw text of the id of a message that a JSON
// decoder could not read (too deep, or cut short), when it looks like a
// response: an object with "jsonrpc" and "result" or "error", without
// "method", whose top-level id, wherever it stands, is a string or an
// integer. The parts are the message's text in
// order (it may be incomplete: an id after the cut is not found).
func ResponseID(parts ...[]byte) (json.RawMessage, bool) {
	id, ok := responseID(parts...)
	if !ok {
		return nil, false
	}
	raw, err := json.Marshal(id.Raw())
	if err != nil {
		return nil, false
	}
	return raw, true
}

// tooLarge builds the error response for an oversized response, or logs why
// there is none and returns nil.
func (m *msgReader) tooLarge(o *oversize) jsonrpc.Message {
	s := &o.scan
	switch {
	case !s.object:
		m.log.Warn("skipping an oversized line on the server's stdout that is not a JSON-RPC message", "size", o.size, "limit", m.max)
		return nil
	case s.hasMethod:
		m.log.Warn("dropping an oversized request or notification from the server", "size", o.size, "limit", m.max)
		return nil
	}
	id, ok := s.id()
	if !ok {
		m.log.Error("dropping an oversized message from the server whose id could not be read; its call will time out", "size", o.size, "limit", m.max)
		return nil
	}
	data, _ := json.Marshal(map[string]int64{"size": o.size, "limit": m.max})
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{
		Code:    CodeTooLarge,
		Message: fmt.Sprintf("result of %d bytes exceeds the limit of %d bytes", o.size, m.max),
		Data:    data,
	}}
}

// fill reads once into buf after the unconsumed bytes, moving them to the
// front first. It records a read error.
func (m *msgReader) fill() {
	if m.pos > 0 {
		m.end = copy(m.buf, m.buf[m.pos:m.end])
		m.pos = 0
	}
	n, err := m.r.Read(m.buf[m.end:])
	m.end += n
	if err != nil {
		m.err = err
	} else if n == 0 {
		m.err = io.ErrNoProgress
	}
}

// releaseBeforeGrowth is the line size from which joining a long line
// first returns freed memory to the operating system.
const releaseBeforeGrowth = 16 << 20

// readLine returns the next line without its newline, in a slice the caller
// owns; or, for a line over the limit, its description; or the read error
// once everything read before it was returned. A last line without a newline
// counts as a line.
func (m *msgReader) readLine() ([]byte, *oversize, error) {
	// Short lines are found in the read buffer and copied out.
	for {
		if i := bytes.IndexByte(m.buf[m.pos:m.end], '\n'); i >= 0 {
			seg := m.buf[m.pos : m.pos+i]
			m.pos += i + 1
			if int64(len(seg)) > m.max {
				o := &oversize{size: int64(len(seg))}
				o.scan.feed(seg)
				return nil, o, nil
			}
			return bytes.Clone(seg), nil, nil
		}
		if m.err != nil {
			if m.pos == m.end {
				return nil, nil, m.err
			}
			seg := m.buf[m.pos:m.end]
			m.pos = m.end
			if int64(len(seg)) > m.max {
				o := &oversize{size: int64(len(seg))}
				o.scan.feed(seg)
				return nil, o, nil
			}
			return bytes.Clone(seg), nil, nil
		}
		if m.end-m.pos == len(m.buf) {
			if m.stream != nil {
				if sink := m.stream(m.buf[m.pos:m.end]); sink != nil {
					return m.streamLine(sink)
				}
			}
			break // a long line: grow it outside the read buffer
		}
		m.fill()
	}

	// A long line: read it into chunks, each filled before the next is
	// made, then copy them once into a buffer of the line's exact size,
	// returning copied chunks to the OS as it goes (joinLine). The peak is
	// the line plus at most 16 MiB wherever its size falls. A buffer that
	// doubles as it grows needed up to three times the line: the outgrown
	// buffer plus one of twice its size, which the runtime may zero whole
	// (measured with make bench: a 40 MB line peaked at 86 MiB or, one run
	// in four, 112-115 MiB; now 71 MiB every time).
	chunks := [][]byte{bytes.Clone(m.buf[m.pos:m.end])}
	total := int64(m.end - m.pos)
	m.pos, m.end = 0, 0
	var cur []byte
	for {
		if total > m.max {
			return m.discard(append(chunks, cur)...)
		}
		if len(cur) == cap(cur) {
			if cur != nil {
				chunks = append(chunks, cur)
			}
			cur = make([]byte, 0, min(max(total, 4*readChunk), longLineChunk))
		}
		// At most readChunk bytes at a time, so that the bytes after the
		// newline fit back into the read buffer.
		start := len(cur)
		n, err := m.r.Read(cur[start:min(cap(cur), start+readChunk)])
		cur = cur[:start+n]
		if i := bytes.IndexByte(cur[start:], '\n'); i >= 0 {
			m.end = copy(m.buf, cur[start+i+1:])
			cur = cur[:start+i]
			if err != nil {
				m.err = err
			}
			return m.joinLine(append(chunks, cur), total+int64(i))
		}
		total += int64(n)
		if err == nil && n == 0 {
			err = io.ErrNoProgress
		}
		if err != nil {
			m.err = err
			return m.joinLine(append(chunks, cur), total)
		}
	}
}

// longLineChunk is the largest chunk a long line is read into.
const longLineChunk = 4 << 20

// joinLine returns a long line read in chunks (total bytes in all) as one
// slice the caller owns, or its description if it is over the limit.
func (m *msgReader) joinLine(chunks [][]byte, total int64) ([]byte, *oversize, error) {
	if total > m.max {
		o := &oversize{}
		for _, c := range chunks {
			o.scan.feed(c)
			o.size += int64(len(c))
		}
		return nil, o, nil
	}
	if total >= releaseBeforeGrowth {
		// Return what earlier messages left, so the peak is this line's
		// chunks and its copy, not those plus garbage.
		debug.FreeOSMemory()
	}
	line := make([]byte, 0, total)
	copied := 0
	for i, c := range chunks {
		line = append(line, c...)
		chunks[i] = nil
		// Hand the copied chunks back every releaseBeforeGrowth bytes,
		// so the chunks and the copy are not all live at once.
		if copied += len(c); copied >= releaseBeforeGrowth && i < len(chunks)-1 {
			debug.FreeOSMemory()
			copied = 0
		}
	}
	return line, nil, nil
}

// discard consumes the rest of a line that is already over the limit,
// keeping nothing but its size and what the scanner learns.
func (m *msgReader) discard(read ...[]byte) ([]byte, *oversize, error) {
	o := &oversize{}
	for _, p := range read {
		o.scan.feed(p)
		o.size += int64(len(p))
	}
	read = nil // let the collector have it while the rest streams by
	for {
		if i := bytes.IndexByte(m.buf[m.pos:m.end], '\n'); i >= 0 {
			o.scan.feed(m.buf[m.pos : m.pos+i])
			o.size += int64(i)
			m.pos += i + 1
			return nil, o, nil
		}
		o.scan.feed(m.buf[m.pos:m.end])
		o.size += int64(m.end - m.pos)
		m.pos, m.end = 0, 0
		if m.err != nil {
			return nil, o, nil
		}
		m.fill()
	}
}

// topScanner follows the top level of a JSON object streamed in pieces
// without keeping it: it notes whether the text starts as an object, whether
// it has a top-level "method" key, and the raw text of a scalar top-level
// "id". It never fails; on text that is not JSON its findings are
// meaningless but harmless (the id is checked before use).
type topScanner struct {
	started    bool // a non-space byte was seen
	object     bool // ... and it was '{'
	done       bool // the top-level value ended, or is not an object
	depth      int
	inStr      bool
	esc        bool
	strIsKey   bool
	phase      int    // at depth 1: scanKey, scanColon or scanValue
	key        []byte // the top-level key being read (up to 16 bytes)
	keyLong    bool
	valueKey   string // the key whose value is being read at depth 1
	hasID      bool
	idRaw      []byte // raw text of the id value (up to 256 bytes)
	idBad      bool   // the id is not a scalar or too long
	hasMethod  bool
	hasResult  bool // a top-level "result" or "error" key
	hasJSONRPC bool // a top-level "jsonrpc" key
}

const (
	scanKey = iota
	scanColon
	scanValue
)

func (s *topScanner) capturing() bool {
	return s.depth == 1 && s.phase == scanValue && s.valueKey == "id"
}

func (s *topScanner) addID(c byte) {
	if len(s.idRaw) >= 256 {
		s.idBad = true
		return
	}
	s.idRaw = append(s.idRaw, c)
}

func (s *topScanner) feed(p []byte) {
	for i := 0; i < len(p); i++ {
		if s.done {
			return
		}
		if s.inStr && !s.strIsKey && !s.capturing() {
			// Inside a string nobody needs: jump to its closing quote.
			j := bytes.IndexByte(p[i:], '"')
			if j < 0 {
				s.esc = escapedAfter(p[i:], s.esc)
				return
			}
			escaped := escapedAfter(p[i:i+j], s.esc)
			s.esc = false
			if !escaped {
				s.inStr = false
			}
			i += j
			continue
		}
		c := p[i]
		if !s.started {
			if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
				continue
			}
			s.started = true
			if c != '{' {
				s.done = true
				return
			}
			s.object, s.depth, s.phase = true, 1, scanKey
			continue
		}
		if s.inStr {
			if s.capturing() {
				s.addID(c)
			}
			switch {
			case s.esc:
				s.esc = false
			case c == '\\':
				s.esc = true
			case c == '"':
				s.inStr = false
				if s.strIsKey {
					s.strIsKey = false
					s.phase, s.valueKey = scanColon, ""
					if !s.keyLong {
						s.valueKey = string(s.key)
					}
				}
				continue
			}
			if s.strIsKey {
				if len(s.key) < 16 {
					s.key = append(s.key, c)
				} else {
					s.keyLong = true
				}
			}
			continue
		}
		switch c {
		case '"':
			s.inStr = true
			if s.depth == 1 && s.phase == scanKey {
				s.strIsKey, s.key, s.keyLong = true, s.key[:0], false
			} else if s.capturing() {
				s.addID(c)
			}
		case '{', '[':
			if s.capturing() {
				s.idBad = true
			}
			s.depth++
		case '}', ']':
			s.depth--
			if s.depth <= 0 {
				s.done = true
				return
			}
		case ':':
			if s.depth == 1 && s.phase == scanColon {
				s.phase = scanValue
				switch s.valueKey {
				case "id":
					s.hasID, s.idRaw, s.idBad = true, s.idRaw[:0], false
				case "method":
					s.hasMethod = true
				case "result", "error":
					s.hasResult = true
				case "jsonrpc":
					s.hasJSONRPC = true
				}
			}
		case ',':
			if s.depth == 1 {
				s.phase, s.valueKey = scanKey, ""
			}
		default:
			if s.capturing() {
				s.addID(c)
			}
		}
	}
}

// escapedAfter reports whether the byte after seg, inside a JSON string, is
// escaped: seg ends in an odd run of backslashes, counting a pending escape
// (pending) from before seg when the run covers all of seg.
func escapedAfter(seg []byte, pending bool) bool {
	n := 0
	for n < len(seg) && seg[len(seg)-1-n] == '\\' {
		n++
	}
	if n == len(seg) {
		return pending != (n%2 == 1)
	}
	return n%2 == 1
}

// id returns the top-level id if it is a string or an integer.
func (s *topScanner) id() (jsonrpc.ID, bool) {
	if !s.hasID || s.idBad {
		return jsonrpc.ID{}, false
	}
	var v any
	if err := json.Unmarshal(bytes.TrimSpace(s.idRaw), &v); err != nil {
		return jsonrpc.ID{}, false
	}
	if f, ok := v.(float64); ok && (f != math.Trunc(f) || math.Abs(f) > 1<<53) {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil || !id.IsValid() {
		return jsonrpc.ID{}, false
	}
	return id, true
}

// logLine is the start of a skipped line, for a log attribute.
func logLine(b []byte) string {
	if len(b) > logLineMax {
		b = b[:logLineMax]
	}
	return truncateUTF8(sanitizeLine(b), logLineMax)
}

// decodeJSONRPC is jsonrpc.DecodeMessage done with the standard library's
// decoder. go-sdk's decoder allocates a large read buffer for every
// message; under load (50 tabs of small calls) that was the biggest single
// cost of the bridge's CPU time.
func decodeJSONRPC(data []byte) (jsonrpc.Message, error) {
	var w struct {
		Version string          `json:"jsonrpc"`
		ID      any             `json:"id"`
		Method  json.RawMessage `json:"method"`
		Params  json.RawMessage `json:"params"`
		Result  json.RawMessage `json:"result"`
		Error   *jsonrpc.Error  `json:"error"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if w.Version != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected %q", w.Version, "2.0")
	}
	id, err := jsonrpc.MakeID(w.ID)
	if err != nil {
		return nil, err
	}
	if len(w.Method) > 0 {
		var method string
		if err := json.Unmarshal(w.Method, &method); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		return &jsonrpc.Request{ID: id, Method: method, Params: w.Params}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("a response without an id")
	}
	resp := &jsonrpc.Response{ID: id, Result: w.Result}
	if w.Error != nil {
		resp.Error = w.Error
	}
	return resp, nil
}
