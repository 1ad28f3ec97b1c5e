package bridge

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
)

// Chunking: a message larger than the frame limit travels as tools:chunk
// frames whose "data" strings concatenate to the message's text. See
// PROTOCOL.md, "Chunks".

// chunkHeadMax bounds the bytes of a chunk frame outside its data string.
const chunkHeadMax = 160

// needsEscape[b] is the number of bytes b takes inside a JSON string.
var escapedLen = func() (t [256]uint8) {
	for i := range t {
		t[i] = 1
	}
	for i := 0; i < 0x20; i++ {
		t[i] = 6 // \u00XX
	}
	t['\n'], t['\r'], t['\t'], t['\b'], t['\f'] = 2, 2, 2, 2, 2
	t['"'], t['\\'] = 2, 2
	return t
}()

// pos is a place in a message made of parts: before byte off of parts[part].
type pos struct{ part, off int }

// planChunks returns the end positions of the pieces of the message made of
// parts, such that each piece, escaped as a JSON string, fits in budget
// bytes, and no piece ends inside a UTF-8 sequence. Each part must be whole
// UTF-8 on its own (the bridge's parts are JSON texts).
func planChunks(parts [][]byte, budget int) []pos {
	if budget < 16 {
		budget = 16
	}
	var ends []pos
	used := 0
	for pi, msg := range parts {
		for i := 0; i < len(msg); {
			c := msg[i]
			n := 1
			w := int(escapedLen[c])
			if c >= utf8.RuneSelf {
				_, n = utf8.DecodeRune(msg[i:])
				w = n
				if n == 1 { // invalid byte: written as \ufffd
					w = 6
				}
			}
			if used+w > budget && used > 0 {
				ends = append(ends, pos{pi, i})
				used = 0
			}
			used += w
			i += n
		}
	}
	return append(ends, pos{len(parts) - 1, len(parts[len(parts)-1])})
}

const hexDigits = "0123456789abcdef"

// appendEscaped appends s as the inside of a JSON string.
func appendEscaped(dst, s []byte) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if escapedLen[c] == 1 {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += n
	}
	return append(dst, s[start:]...)
}

// chunkFrames writes the message made of parts as chunk sequence id, one
// frame per writer that next returns (closing it ends the frame). Frames are
// escaped through scratch in pieces; how a frame reaches the socket is the
// writer's business (a tab collects each into one WebSocket frame).
func chunkFrames(parts [][]byte, id string, frameLimit int, scratch []byte, next func() (io.WriteCloser, error)) error {
	ends := planChunks(parts, frameLimit-chunkHeadMax)
	total := msgSize(parts)
	if cap(scratch) < 4096 {
		scratch = make([]byte, 0, 32<<10)
	}
	flushAt := cap(scratch) - 8 // one escaped byte is at most 6
	count := strconv.Itoa(len(ends))
	size := strconv.FormatInt(total, 10)
	start := pos{0, 0}
	for seq, end := range ends {
		w, err := next()
		if err != nil {
			return err
		}
		buf := scratch[:0]
		buf = append(buf, `{"type":"tools:chunk","id":"`...)
		buf = append(buf, id...)
		buf = append(buf, `","seq":`...)
		buf = strconv.AppendInt(buf, int64(seq), 10)
		buf = append(buf, `,"count":`...)
		buf = append(buf, count...)
		buf = append(buf, `,"size":`...)
		buf = append(buf, size...)
		buf = append(buf, `,"data":"`...)
		for p := start.part; p <= end.part && err == nil; p++ {
			from, to := 0, len(parts[p])
			if p == start.part {
				from = start.off
			}
			if p == end.part {
				to = end.off
			}
			for piece := parts[p][from:to]; len(piece) > 0 && err == nil; {
				// Escape as much as fits in scratch, ending on a character.
				n := min(len(piece), (flushAt-len(buf))/6)
				for n < len(piece) && n > 0 && !utf8.RuneStart(piece[n]) {
					n--
				}
				if n == 0 {
					_, err = w.Write(buf)
					buf = buf[:0]
					continue
				}
				buf = appendEscaped(buf, piece[:n])
				piece = piece[n:]
				if len(buf) >= flushAt/2 {
					_, err = w.Write(buf)
					buf = buf[:0]
				}
			}
		}
		if err == nil {
			buf = append(buf, `"}`...)
			_, err = w.Write(buf)
		}
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		start = end
	}
	return nil
}

// chunkIn is one page chunk frame.
type chunkIn struct {
	ID    json.RawMessage `json:"id"`
	Seq   *int64          `json:"seq"`
	Count *int64          `json:"count"`
	Size  *int64          `json:"size"`
	Data  *string         `json:"data"`
}

// chunkPool bounds the bytes declared by the open inbound chunk sequences of
// all tabs together (Options.ChunkMemory). A nil pool bounds nothing.
type chunkPool struct {
	limit int64
	used  atomic.Int64
}

// reserve takes n bytes from the pool; false if they would exceed its limit.
func (p *chunkPool) reserve(n int64) bool {
	if p == nil {
		return true
	}
	for {
		u := p.used.Load()
		if u+n > p.limit {
			return false
		}
		if p.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

func (p *chunkPool) free(n int64) {
	if p != nil {
		p.used.Add(-n)
	}
}

// reassembler rebuilds page messages sent as chunks. add and expire are
// called by the tab's read loop; each open sequence's timer drops it when
// it is not completed in time, even if no further frame arrives, and
// closeAll, when the read loop ends, stops the timers and waits for any
// that fired.
type reassembler struct {
	limit    int64         // the inbound limit for one message and for all open sequences together
	maxOpen  int           // open sequences at once
	timeout  time.Duration // a sequence not completed in this time is dropped
	now      func() time.Time
	pool     *chunkPool         // shared by every tab; nil = unbounded
	onExpire func(id string)    // called by a sequence's timer after dropping it; nil = none
	admitNew func() *protoError // asked before a new sequence opens (the memory ceiling); nil = always
	timers   sync.WaitGroup     // timers started and neither stopped nor done

	mu      sync.Mutex
	open    map[string]*sequence // guarded by mu; by id key
	dropped map[string]time.Time // guarded by mu; ids of failed sequences whose later chunks are ignored
	pending int64                // guarded by mu; bytes declared by open sequences
	closed  bool                 // guarded by mu; closeAll ran: no more timers
}

type sequence struct {
	count, size, next int64
	buf               []byte
	started           time.Time
	timer             *time.Timer // drops the sequence after the timeout; nil without onExpire
}

func newReassembler(limit int64, maxOpen int, timeout time.Duration) *reassembler {
	return &reassembler{limit: limit, maxOpen: maxOpen, timeout: timeout, now: time.Now,
		open: map[string]*sequence{}, dropped: map[string]time.Time{}}
}

// add takes one chunk frame (already known to be of type tools:chunk with a
// valid id). It returns the whole message when this chunk completes it. A
// non-nil error means the sequence was dropped and must be answered once;
// (nil, nil) with ignore=true means the chunk belongs to an already dropped
// sequence.
func (r *reassembler) add(id json.RawMessage, frame []byte) (msg []byte, ignore bool, perr *protoError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := idKey(id)
	if _, gone := r.dropped[key]; gone {
		return nil, true, nil
	}
	var c chunkIn
	if perr := decodeFields(frame, &c); perr != nil {
		return nil, false, r.drop(key, perr)
	}
	if c.Seq == nil || c.Count == nil || c.Size == nil || c.Data == nil {
		return nil, false, r.drop(key, errorf(CodeBadRequest, "a chunk needs seq, count, size and data"))
	}
	seq := r.open[key]
	if seq == nil {
		if *c.Seq != 0 {
			return nil, false, r.drop(key, errorf(CodeBadRequest, "chunk sequence %s starts at seq %d, not 0", id, *c.Seq))
		}
		if *c.Count < 1 || *c.Size < 0 || *c.Count > *c.Size+1 {
			return nil, false, r.drop(key, errorf(CodeBadRequest, "chunk sequence %s has an impossible count %d for size %d", id, *c.Count, *c.Size))
		}
		if *c.Size > r.limit || r.pending+*c.Size > r.limit {
			e := errorf(CodeTooLargeErr, "message of %d bytes exceeds the inbound limit of %d bytes", *c.Size, r.limit)
			e.Limit, e.Size = r.limit, *c.Size
			return nil, false, r.drop(key, e)
		}
		if len(r.open) >= r.maxOpen {
			return nil, false, r.drop(key, errorf(CodeBadRequest, "at most %d chunk sequences may be open at once", r.maxOpen))
		}
		if r.admitNew != nil {
			if e := r.admitNew(); e != nil {
				return nil, false, r.drop(key, e)
			}
		}
		if !r.pool.reserve(*c.Size) {
			e := errorf(CodeBusy, "the bridge already holds its limit of %d bytes of incomplete chunk sequences: send the message again later", r.pool.limit)
			e.Limit, e.Size = r.pool.limit, *c.Size
			return nil, false, r.drop(key, e)
		}
		seq = &sequence{count: *c.Count, size: *c.Size, started: r.now()}
		seq.buf = make([]byte, 0, *c.Size)
		r.open[key] = seq
		r.pending += seq.size
		if r.onExpire != nil && !r.closed {
			r.timers.Add(1)
			seq.timer = time.AfterFunc(r.timeout, func() {
				defer r.timers.Done()
				r.mu.Lock()
				mine := r.open[key] == seq
				if mine {
					r.drop(key, nil)
				}
				r.mu.Unlock()
				if mine {
					r.onExpire(key)
				}
			})
		}
	}
	switch {
	case *c.Seq != seq.next:
		return nil, false, r.drop(key, errorf(CodeBadRequest, "chunk sequence %s: got seq %d, expected %d", id, *c.Seq, seq.next))
	case *c.Count != seq.count || *c.Size != seq.size:
		return nil, false, r.drop(key, errorf(CodeBadRequest, "chunk sequence %s: count or size changed", id))
	case int64(len(seq.buf)+len(*c.Data)) > seq.size:
		return nil, false, r.drop(key, errorf(CodeBadRequest, "chunk sequence %s: more data than its size %d", id, seq.size))
	}
	seq.buf = append(seq.buf, *c.Data...)
	seq.next++
	if seq.next < seq.count {
		return nil, false, nil
	}
	r.close(key)
	if int64(len(seq.buf)) != seq.size {
		return nil, false, r.drop(key, errorf(CodeBadRequest, "chunk sequence %s: %d bytes received, size says %d", id, len(seq.buf), seq.size))
	}
	return seq.buf, false, nil
}

// close forgets an open sequence and gives its bytes back. Called with mu held.
func (r *reassembler) close(key string) {
	if seq := r.open[key]; seq != nil {
		r.pending -= seq.size
		r.pool.free(seq.size)
		delete(r.open, key)
		if seq.timer != nil && seq.timer.Stop() {
			r.timers.Done() // it will not run
		}
	}
}

// closeAll drops every open sequence (the tab is closing), stops their
// timers and waits for any timer already running.
func (r *reassembler) closeAll() {
	r.mu.Lock()
	r.closed = true
	for key := range r.open {
		r.close(key)
	}
	r.mu.Unlock()
	r.timers.Wait()
}

// drop closes a sequence and remembers its id. Called with mu held.
func (r *reassembler) drop(key string, perr *protoError) *protoError {
	r.close(key)
	if len(r.dropped) >= 64 { // bounded: forget the oldest
		var oldest string
		var t time.Time
		for k, v := range r.dropped {
			if oldest == "" || v.Before(t) {
				oldest, t = k, v
			}
		}
		delete(r.dropped, oldest)
	}
	r.dropped[key] = r.now()
	return perr
}

// expire drops sequences older than the timeout and returns their ids.
func (r *reassembler) expire() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	now := r.now()
	for key, seq := range r.open {
		if now.Sub(seq.started) > r.timeout {
			ids = append(ids, key)
			r.drop(key, nil)
		}
	}
	for key, t := range r.dropped {
		if now.Sub(t) > 2*r.timeout {
			delete(r.dropped, key)
		}
	}
	return ids
}

func (s *sequence) String() string { return fmt.Sprintf("%d/%d", s.next, s.count) }

// binaryChunks writes a message larger than the frame limit to a page that
// asked for the feature "binary" (tools:hello): one text frame, the
// sequence's head {"type":"tools:chunk","id","count","size","binary":true},
// then count binary frames holding the message's bytes in order, each at
// most frameLimit bytes and never spanning two of its parts, so that no
// byte is copied or escaped (a 40 MB result is its own frames' payload).
// A frame may end inside a UTF-8 sequence: the page decodes the whole.
// write sends one frame of the given gorilla message type.
func binaryChunks(parts [][]byte, id string, frameLimit int, write func(typ int, p []byte) error) error {
	count := 0
	for _, p := range parts {
		count += (len(p) + frameLimit - 1) / frameLimit
	}
	head := make([]byte, 0, 128)
	head = append(head, `{"type":"tools:chunk","id":"`...)
	head = append(head, id...)
	head = append(head, `","count":`...)
	head = strconv.AppendInt(head, int64(count), 10)
	head = append(head, `,"size":`...)
	head = strconv.AppendInt(head, msgSize(parts), 10)
	head = append(head, `,"binary":true}`...)
	if err := write(websocket.TextMessage, head); err != nil {
		return err
	}
	for _, p := range parts {
		for len(p) > 0 {
			n := min(len(p), frameLimit)
			if err := write(websocket.BinaryMessage, p[:n]); err != nil {
				return err
			}
			p = p[n:]
		}
	}
	return nil
}
