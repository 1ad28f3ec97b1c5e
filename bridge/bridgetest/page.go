package bridgetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gorilla/websocket"
)

// Page is a test client of the bridge's page protocol: what a Builder tab
// does, over a real WebSocket. It reassembles tools:chunk sequences, keeps
// every message it received, and lets a test wait for the one it expects.
type Page struct {
	Conn *websocket.Conn
	// FrameLimit is the largest frame Send writes; larger messages are sent
	// as tools:chunk frames. If zero, 8 MiB.
	FrameLimit int

	wmu sync.Mutex // serializes writes

	gate chan struct{} // guarded by mu; set by HoldReads: the read loop waits for it to close before its next read

	mu        sync.Mutex
	cond      *sync.Cond
	msgs      []*Msg               // guarded by mu; every whole message received, in order
	err       error                // guarded by mu; why the read loop stopped
	maxFrame  int                  // guarded by mu; the largest frame received
	frames    int                  // guarded by mu
	chunks    map[string]*chunkSeq // owned by readLoop
	bin       *chunkSeq            // owned by readLoop: the binary chunk sequence being received (feature "binary")
	binFrames int                  // guarded by mu; binary frames received
	numbered  bool                 // owned by readLoop: a page session was granted: streamed frames lead with their number
	lastN     uint64               // owned by readLoop: the number of the last streamed frame
	large     int                  // owned by readLoop: the size of the largest message so far, and some (readMessage's hint)
	streams   []StreamInfo         // guarded by mu; the streamed results received, in order
	streaming int                  // guarded by mu; the bytes of the stream being received
	nextChunk int                  // guarded by mu; ids of chunk sequences sent
	done      chan struct{}        // closed by readLoop
}

type chunkSeq struct {
	next, count, size int
	buf               []byte
	stream            bool      // a streamed result: frames until its end frame; buf holds its bytes
	first             time.Time // when its first binary frame came
	head              time.Time // when its head came
}

// StreamInfo describes one streamed result a Page received (the feature
// "stream").
type StreamInfo struct {
	Head, FirstFrame, End time.Time // when the head, the first binary frame and the end frame came
	Frames                int       // binary frames
	Bytes                 int       // their bytes
	OK                    bool      // the end frame said ok
}

// WaitStreaming waits until the result being streamed has at least n
// bytes.
func (p *Page) WaitStreaming(ctx context.Context, n int) error {
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.streaming < n {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%d bytes of the stream came, waiting for %d: %w", p.streaming, n, err)
		}
		if p.err != nil {
			return p.err
		}
		p.cond.Wait()
	}
	return nil
}

// Streams returns the streamed results received so far.
func (p *Page) Streams() []StreamInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.streams)
}

// Msg is one message from the bridge.
type Msg struct {
	Raw    []byte
	Type   string
	ID     json.RawMessage
	OK     *bool
	Error  *MsgError
	Fields map[string]json.RawMessage

	taken bool
}

// MsgError is a failed reply's error object.
type MsgError struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Server  json.RawMessage `json:"server,omitempty"`
	Limit   int64           `json:"limit,omitempty"`
	Size    int64           `json:"size,omitempty"`
}

// String returns the raw JSON text.
func (m *Msg) String() string { return string(m.Raw) }

// Str decodes field key as a string ("" if absent).
func (m *Msg) Str(key string) string {
	var s string
	_ = json.Unmarshal(m.Fields[key], &s)
	return s
}

// Dial opens a page socket. header may carry Origin, Cookie, Authorization.
func Dial(ctx context.Context, url string, header http.Header) (*Page, *http.Response, error) {
	return DialVia(ctx, url, header, nil)
}

// DialVia is Dial over the connection dial returns (nil: a TCP connection
// to url's host), for a bridge served on an in-memory listener, such as a
// net.Pipe in a testing/synctest bubble.
func DialVia(ctx context.Context, url string, header http.Header, dial func(context.Context) (net.Conn, error)) (*Page, *http.Response, error) {
	d := websocket.Dialer{ReadBufferSize: 64 << 10, WriteBufferSize: 64 << 10}
	if dial != nil {
		d.NetDialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }
	}
	conn, resp, err := d.DialContext(ctx, url, header)
	if err != nil {
		return nil, resp, err
	}
	conn.SetReadLimit(-1)
	p := &Page{Conn: conn, chunks: map[string]*chunkSeq{}, done: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	go p.readLoop()
	return p, resp, nil
}

// Close closes the socket and waits for the read loop.
func (p *Page) Close() error {
	p.wmu.Lock()
	_ = p.Conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	p.wmu.Unlock()
	err := p.Conn.Close()
	<-p.done
	return err
}

// Drop closes the TCP connection without a close frame (a crashed tab).
func (p *Page) Drop() {
	p.Conn.UnderlyingConn().Close()
	<-p.done
}

// Done is closed when the socket has stopped reading.
func (p *Page) Done() <-chan struct{} { return p.done }

// Err is why the read loop stopped (a *websocket.CloseError for a close frame).
func (p *Page) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// fail ends the read loop with err and closes the socket.
func (p *Page) fail(err error) {
	p.mu.Lock()
	p.err = err
	p.cond.Broadcast()
	p.mu.Unlock()
	p.Conn.Close()
}

// HoldReads stops the page reading its socket (after the frame being
// read), as a page that stops reading does, until the function returned
// is called.
func (p *Page) HoldReads() (release func()) {
	gate := make(chan struct{})
	p.mu.Lock()
	p.gate = gate
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			p.gate = nil
			p.mu.Unlock()
			close(gate)
		})
	}
}

// BinaryFrames is the number of binary frames received so far.
func (p *Page) BinaryFrames() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.binFrames
}

// MaxFrame is the largest frame received so far, and the number of frames.
func (p *Page) MaxFrame() (size, frames int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxFrame, p.frames
}

func (p *Page) readLoop() {
	defer close(p.done)
	for {
		p.mu.Lock()
		gate := p.gate
		p.mu.Unlock()
		if gate != nil {
			<-gate
		}
		typ, r, err := p.Conn.NextReader()
		var data []byte
		var into *chunkSeq // the stream whose bytes data was read onto
		if err == nil {
			if s := p.bin; typ == websocket.BinaryMessage && s != nil && s.stream {
				// A piece of the result being streamed: read straight onto
				// the result's bytes, sized at first by the last large
				// message.
				if s.buf == nil {
					s.buf = make([]byte, 0, p.large)
				}
				start := len(s.buf)
				s.buf, err = readMessage(r, s.buf, p.large)
				data, into = s.buf[start:], s
			} else if data, err = readMessage(r, nil, p.large); len(data) > 64<<10 {
				p.large = max(p.large, len(data)+4096)
			}
		}
		p.mu.Lock()
		if err != nil {
			p.err = err
			p.cond.Broadcast()
			p.mu.Unlock()
			return
		}
		p.frames++
		if len(data) > p.maxFrame {
			p.maxFrame = len(data)
		}
		if typ == websocket.BinaryMessage {
			p.binFrames++
		}
		p.mu.Unlock()
		if s := into; s != nil {
			// A piece of the result being streamed; in a page session it
			// leads with its number (a resent one is dropped).
			start := len(s.buf) - len(data)
			if p.numbered {
				if len(data) < 8 {
					p.fail(fmt.Errorf("a streamed frame of %d bytes, without its number", len(data)))
					return
				}
				n := binary.BigEndian.Uint64(data)
				if n <= p.lastN {
					s.buf = s.buf[:start]
					continue
				}
				p.lastN = n
				s.buf = s.buf[:start+copy(s.buf[start:], data[8:])]
			}
			if s.first.IsZero() {
				s.first = time.Now()
			}
			s.next++
			p.mu.Lock()
			p.streaming = len(s.buf)
			p.cond.Broadcast()
			p.mu.Unlock()
			continue
		}
		if typ == websocket.BinaryMessage {
			// A piece of the binary chunk sequence announced last.
			s := p.bin
			if s == nil || len(s.buf)+len(data) > s.size {
				p.fail(fmt.Errorf("a binary frame of %d bytes outside a binary chunk sequence, or past its size", len(data)))
				return
			}
			s.buf = append(s.buf, data...)
			if s.next++; s.next < s.count {
				continue
			}
			p.bin = nil
			if len(s.buf) != s.size {
				p.fail(fmt.Errorf("a binary chunk sequence of %d bytes, announced as %d", len(s.buf), s.size))
				return
			}
			p.deliver(parseMsg(s.buf))
			continue
		}
		// Each frame is parsed once; a chunk's data is unescaped straight
		// into its sequence's buffer, and the whole message parsed once
		// it is complete.
		m, err := parseMsg(data)
		if err == nil && m.Type == "tools:hello" && bytes.Contains(m.Fields["features"], []byte(`"resume"`)) {
			p.numbered = true
		}
		if err == nil && m.Type == "tools:chunk" && (string(m.Fields["stream"]) == "true" || string(m.Fields["end"]) == "true") {
			if err := p.streamFrame(m); err != nil {
				p.fail(err)
				return
			}
			continue
		}
		if err == nil && m.Type == "tools:chunk" && string(m.Fields["binary"]) == "true" {
			var head struct{ Count, Size int }
			if err := json.Unmarshal(data, &head); err != nil || head.Count < 1 || p.bin != nil {
				p.fail(fmt.Errorf("a binary chunk head %q: %v", data, err))
				return
			}
			p.bin = &chunkSeq{count: head.Count, size: head.Size, buf: make([]byte, 0, head.Size)}
			continue
		}
		if err == nil && m.Type == "tools:chunk" && m.Fields["data"] != nil {
			whole, rerr := p.reassemble(m)
			if rerr != nil {
				p.fail(rerr)
				return
			}
			if whole == nil {
				continue
			}
			m, err = parseMsg(whole)
		}
		p.deliver(m, err)
	}
}

// streamFrame handles a streamed result's head or end frame.
func (p *Page) streamFrame(m *Msg) error {
	var f struct {
		ID          string
		Stream, End bool
		OK          bool
		Count, Size int
		N           uint64
	}
	if err := json.Unmarshal(m.Raw, &f); err != nil {
		return fmt.Errorf("a stream frame %q: %v", m.Raw, err)
	}
	if f.N > 0 {
		if f.N <= p.lastN {
			return nil // resent after a resume: the page has it
		}
		p.lastN = f.N
	}
	if f.Stream {
		// A head: a sequence resent from its start replaces the one begun.
		p.bin = &chunkSeq{stream: true, head: time.Now()}
		return nil
	}
	s := p.bin
	if s == nil || !s.stream {
		return fmt.Errorf("a stream's end %q without its head", m.Raw)
	}
	p.bin = nil
	p.mu.Lock()
	p.streaming = 0
	p.streams = append(p.streams, StreamInfo{Head: s.head, FirstFrame: s.first, End: time.Now(), Frames: s.next, Bytes: len(s.buf), OK: f.OK})
	p.mu.Unlock()
	if !f.OK {
		return nil // the call's error follows
	}
	if f.Count != s.next || f.Size != len(s.buf) {
		return fmt.Errorf("a streamed result of %d frames and %d bytes, its end says %d and %d", s.next, len(s.buf), f.Count, f.Size)
	}
	p.large = max(p.large, len(s.buf)+4096)
	p.deliver(parseMsg(s.buf))
	return nil
}

// readMessage reads a message from r onto buf, growing it by doubling
// (to at least hint once past 64 KiB: a page reading large results
// expects the next to be as large as the last).
func readMessage(r io.Reader, buf []byte, hint int) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			c := max(2*cap(buf), 512)
			if cap(buf) >= 64<<10 {
				c = max(c, hint)
			}
			grown := make([]byte, len(buf), c)
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// deliver keeps a whole message for Wait, or the error that it could not be
// parsed (which ends Wait's waiting).
func (p *Page) deliver(m *Msg, err error) {
	p.mu.Lock()
	if err != nil {
		p.err = err
	} else {
		p.msgs = append(p.msgs, m)
	}
	p.cond.Broadcast()
	p.mu.Unlock()
}

// reassemble adds chunk frame m to its sequence, and returns the whole
// message once the sequence is complete (nil before).
func (p *Page) reassemble(m *Msg) ([]byte, error) {
	var head struct {
		Seq   int `json:"seq"`
		Count int `json:"count"`
		Size  int `json:"size"`
	}
	for k, v := range map[string]*int{"seq": &head.Seq, "count": &head.Count, "size": &head.Size} {
		if err := json.Unmarshal(m.Fields[k], v); err != nil {
			return nil, fmt.Errorf("chunk frame's %q: %w", k, err)
		}
	}
	key := string(m.ID)
	seq := p.chunks[key]
	if seq == nil {
		if head.Seq != 0 {
			return nil, fmt.Errorf("chunk sequence %s starts at %d", key, head.Seq)
		}
		seq = &chunkSeq{count: head.Count, size: head.Size, buf: make([]byte, 0, head.Size)}
		p.chunks[key] = seq
	}
	if head.Seq != seq.next || head.Count != seq.count || head.Size != seq.size {
		return nil, fmt.Errorf("chunk sequence %s out of order: seq %d, expected %d", key, head.Seq, seq.next)
	}
	var err error
	if seq.buf, err = appendUnquoted(seq.buf, m.Fields["data"]); err != nil {
		return nil, fmt.Errorf("chunk sequence %s, seq %d: %w", key, head.Seq, err)
	}
	seq.next++
	if seq.next < seq.count {
		return nil, nil
	}
	delete(p.chunks, key)
	if len(seq.buf) != seq.size {
		return nil, fmt.Errorf("chunk sequence %s: %d bytes, size says %d", key, len(seq.buf), seq.size)
	}
	return seq.buf, nil
}

// appendUnquoted appends the text of lit, a JSON string literal already
// found valid, to dst: runs without escapes are copied whole. A lone
// escaped surrogate becomes U+FFFD, as encoding/json decodes it; bytes
// that are not UTF-8 are an error (the bridge must never send them).
func appendUnquoted(dst, lit []byte) ([]byte, error) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return dst, fmt.Errorf("\"data\" is not a string: %.40s", lit)
	}
	s := lit[1 : len(lit)-1]
	if !utf8.Valid(s) {
		return dst, errors.New("bytes that are not UTF-8 in a text frame")
	}
	for len(s) > 0 {
		i := bytes.IndexByte(s, '\\')
		if i < 0 {
			return append(dst, s...), nil
		}
		dst = append(dst, s[:i]...)
		if i+1 >= len(s) {
			return dst, errors.New("a string ends in a backslash")
		}
		c := s[i+1]
		s = s[i+2:]
		switch c {
		case '"', '\\', '/':
			dst = append(dst, c)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(s)
			if !ok {
				return dst, errors.New("a bad \\u escape")
			}
			s = s[4:]
			if utf16.IsSurrogate(r) {
				r2, ok := rune(-1), false
				if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
					r2, ok = hex4(s[2:])
				}
				if d := utf16.DecodeRune(r, r2); ok && d != utf8.RuneError {
					r = d
					s = s[6:]
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, fmt.Errorf("a bad escape \\%c", c)
		}
	}
	return dst, nil
}

// hex4 reads four hex digits.
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func parseMsg(raw []byte) (*Msg, error) {
	m := &Msg{Raw: raw}
	if err := json.Unmarshal(raw, &m.Fields); err != nil {
		return nil, fmt.Errorf("bridge sent a message that is not a JSON object: %w", err)
	}
	_ = json.Unmarshal(m.Fields["type"], &m.Type)
	m.ID = m.Fields["id"]
	if ok, has := m.Fields["ok"]; has {
		var b bool
		_ = json.Unmarshal(ok, &b)
		m.OK = &b
	}
	if e, has := m.Fields["error"]; has {
		m.Error = &MsgError{}
		_ = json.Unmarshal(e, m.Error)
	}
	return m, nil
}

// Send writes v as one message, in chunks when it is larger than FrameLimit.
func (p *Page) Send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return p.SendText(b)
}

// SendText writes a message's text, in chunks when it is too large.
func (p *Page) SendText(b []byte) error {
	limit := p.FrameLimit
	if limit == 0 {
		limit = 8 << 20
	}
	if len(b) <= limit {
		return p.SendFrame(b)
	}
	p.mu.Lock()
	p.nextChunk++
	id := "p" + strconv.Itoa(p.nextChunk)
	p.mu.Unlock()
	piece := limit / 2 // JSON escaping at most doubles ASCII JSON text
	var ends []int
	for i := 0; i < len(b); {
		end := i + piece
		if end >= len(b) {
			end = len(b)
		} else {
			for end > i && !utf8.RuneStart(b[end]) {
				end--
			}
		}
		ends = append(ends, end)
		i = end
	}
	start := 0
	for seq, end := range ends {
		frame, _ := json.Marshal(map[string]any{"type": "tools:chunk", "id": id, "seq": seq,
			"count": len(ends), "size": len(b), "data": string(b[start:end])})
		if err := p.SendFrame(frame); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// SendFrame writes one text frame as is.
func (p *Page) SendFrame(b []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	return p.Conn.WriteMessage(websocket.TextMessage, b)
}

// Wait returns the first message not yet taken that match accepts, waiting
// for it until ctx ends or the socket closes.
func (p *Page) Wait(ctx context.Context, match func(*Msg) bool) (*Msg, error) {
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for _, m := range p.msgs {
			if !m.taken && match(m) {
				m.taken = true
				return m, nil
			}
		}
		if p.err != nil {
			return nil, fmt.Errorf("socket closed while waiting: %w", p.err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		p.cond.Wait()
	}
}

// Reply waits for the reply of type typ to request id.
func (p *Page) Reply(ctx context.Context, typ string, id any) (*Msg, error) {
	want, _ := json.Marshal(id)
	return p.Wait(ctx, func(m *Msg) bool {
		return m.Type == typ && m.OK != nil && string(m.ID) == string(want)
	})
}

// Request sends v (which must have "type" and "id") and waits for its reply.
func (p *Page) Request(ctx context.Context, v map[string]any) (*Msg, error) {
	if err := p.Send(v); err != nil {
		return nil, err
	}
	typ, _ := v["type"].(string)
	return p.Reply(ctx, typ, v["id"])
}

// All returns every message received so far (taken or not).
func (p *Page) All() []*Msg {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*Msg(nil), p.msgs...)
}

// CloseError returns the close frame the bridge sent, if the socket ended
// with one.
func (p *Page) CloseError() *websocket.CloseError {
	var ce *websocket.CloseError
	if errors.As(p.Err(), &ce) {
		return ce
	}
	return nil
}
