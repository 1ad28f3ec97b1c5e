package bridge

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/stdio"
)

// Streaming a result (the feature "stream", PROTOCOL.md "Streamed
// results"). A stdio server's answer to a call, when it is longer than the
// transport's read buffer and its tab asked for streams, is not held
// whole: the stdio reader hands it over in pieces as it reads them
// (stdio.LineSink), and each piece is checked (jsonScan, utf8Stream, the
// result limit, room in the result pool) and queued for the page as a
// binary frame at once. The call's answer (call.finish) ends the sequence
// with a text frame saying whether the result was whole and valid; when
// it was not, the call's error follows, with the codes a result held whole
// would have had. The page reassembles the frames into the same reply,
// byte for byte, a result held whole gives.
//
// One stream at a time per tab: a result that arrives while another is
// streaming to the same tab is read whole, as without the feature. The
// stdout reader keeps pace with a page that keeps up while nothing else
// waits on that stdout (Pacing, below); otherwise it never waits for a
// page: what the page has not taken is queued for it, counted against its
// queue and the result pool like a result held whole.

// featureStream is the tools:hello feature of streamed results (it needs
// "binary").
const featureStream = "stream"

// errStreamStopped stops the pieces of a stream that failed or whose call
// was answered: the stdio reader reads the rest of the line and drops it.
var errStreamStopped = errors.New("the stream stopped")

// resultStream is the LineSink of one streamed result: it is written by
// the goroutine that reads the server, and ended by that goroutine (End)
// and by the call's answer (finishStream), in either order.
type resultStream struct {
	c     *call
	id    []byte // the response's raw JSON-RPC id
	chunk string // the id of the page's chunk sequence
	pool  *resultPool
	limit int64 // the result limit, for the too-large error

	mu     sync.Mutex
	scan   jsonScan    // guarded by mu; the whole line
	utf    utf8Stream  // guarded by mu; the result's bytes
	begun  bool        // guarded by mu; the sequence's head was queued
	over   bool        // guarded by mu; the call was answered: nothing more is queued
	frames int         // guarded by mu; binary frames queued
	size   int64       // guarded by mu; bytes queued in them
	result int64       // guarded by mu; the result's bytes among them
	fail   *rpcError   // guarded by mu; why the stream failed, as the error response End gives
	perr   *protoError // guarded by mu; or the page's error itself
	whole  bool        // guarded by mu; End found the line whole and valid
	slow   bool        // guarded by mu; the page took nothing for streamPatience: not waited for until it has caught up (keepPace)
}

// streamLine is the stdio transport's StreamLine: it streams a long line
// that answers a call of a tab with the feature, or returns nil to have
// the line read whole.
func (t *tap) streamLine(head []byte) stdio.LineSink {
	id, at, ok := parseResultHead(head)
	if !ok {
		return nil
	}
	t.mu.Lock()
	s := t.byID[rawIDKey(id)]
	t.mu.Unlock()
	if s == nil || s.call == nil || s.list || s.init {
		return nil
	}
	c := s.call
	tb := c.t
	if !tb.streams.Load() || tb.away.Load() || !tb.streamBusy.CompareAndSwap(false, true) {
		return nil
	}
	st := &resultStream{c: c, id: bytes.Clone(id), chunk: tb.b.newToken("s"), pool: t.pool, limit: tb.b.opts.ResultLimit}
	st.scan.resultAt = int64(at)
	st.utf = newUTF8Stream()
	if !c.setStream(st) {
		tb.streamBusy.Store(false)
		return nil
	}
	return st
}

// setStream attaches st to the call, unless the call was answered.
func (c *call) setStream(st *resultStream) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.over || c.ctx.Err() != nil {
		return false
	}
	c.stream = st
	if c.deadline != nil {
		c.deadline.Stop() // the result came within the timeout
	}
	return true
}

// parseResultHead reads the start of a response line,
// {"jsonrpc":"2.0","id":ID,"result": (the two members in either order,
// white space allowed), and returns the raw id and the offset of the first
// byte after the colon. Anything else is not streamed.
func parseResultHead(p []byte) (id []byte, at int, ok bool) {
	i := 0
	ws := func() {
		for i < len(p) && isSpace(p[i]) {
			i++
		}
	}
	expect := func(c byte) bool {
		ws()
		if i < len(p) && p[i] == c {
			i++
			return true
		}
		return false
	}
	if !expect('{') {
		return nil, 0, false
	}
	version := false
	for {
		if !expect('"') {
			return nil, 0, false
		}
		end := bytes.IndexByte(p[i:], '"')
		if end < 0 || end > 16 {
			return nil, 0, false
		}
		key := string(p[i : i+end])
		i += end + 1
		if !expect(':') {
			return nil, 0, false
		}
		ws()
		switch key {
		case "jsonrpc":
			if version || !bytes.HasPrefix(p[i:], []byte(`"2.0"`)) {
				return nil, 0, false
			}
			version = true
			i += len(`"2.0"`)
		case "id":
			if id != nil {
				return nil, 0, false
			}
			j := i
			if j < len(p) && p[j] == '"' {
				k := bytes.IndexAny(p[j+1:], "\"\\")
				if k < 0 || k > 200 || p[j+1+k] != '"' {
					return nil, 0, false
				}
				j += k + 2
			} else {
				if j < len(p) && p[j] == '-' {
					j++
				}
				d := j
				for j < len(p) && j-d < 18 && '0' <= p[j] && p[j] <= '9' {
					j++
				}
				if j == d || p[d] == '0' && j-d > 1 {
					return nil, 0, false // no digits, or a leading zero (not JSON)
				}
			}
			id, i = p[i:j], j
		case "result":
			if !version || id == nil {
				return nil, 0, false
			}
			return id, i, true
		default:
			return nil, 0, false
		}
		if !expect(',') {
			return nil, 0, false
		}
	}
}

// Piece gives the stdio reader a buffer for the next piece: one a tab
// has finished with, else a new one (stdio.PieceSource). Reading into
// the same few buffers spares each megabyte its page faults.
func (st *resultStream) Piece() []byte {
	if b, ok := st.c.t.b.pieces.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, stdio.PieceSize)
}

// recycle hands p's buffer back for Piece, once nothing refers to it.
func (st *resultStream) recycle(p []byte) {
	if cap(p) == stdio.PieceSize {
		p = p[:0]
		st.c.t.b.pieces.Put(&p)
	}
}

// Write checks the next piece of the line and queues the result's bytes
// in it for the page; then, while the page keeps up, waits for it
// (keepPace).
func (st *resultStream) Write(p []byte) error {
	if err := st.write(p); err != nil {
		return err
	}
	st.keepPace()
	return nil
}

// Pacing: the server's reader keeps pace with a page that keeps up, so
// that the bridge holds a few pieces of a result whatever its size, but
// only while nothing else waits on that reader (the stream's call is the
// only one in flight on the server) and while the page takes what it is
// sent. With other calls in flight (another page's answer may be next on
// the same stdout), a page away, or a page that took nothing for
// streamPatience, it does not wait: what the page has not taken is held
// for it, counted, as a result held whole.
const (
	// streamWindow is the most a stream lets its tab's queue hold before
	// the server's reader waits for the page.
	streamWindow = 2 << 20
	// streamRecheck is how often a reader waiting for its page looks
	// again whether another call has come and whether the page took
	// anything.
	streamRecheck = 50 * time.Millisecond
	// streamPatience is how long a page may take nothing before the
	// reader stops waiting for it, until it has caught up (well within
	// the 5 s a server has to answer the bridge's ping, which the
	// waiting reader would otherwise hold up).
	streamPatience = time.Second
)

// keepPace waits until the page's queue is down to streamWindow (see
// Pacing).
func (st *resultStream) keepPace() {
	t, s := st.c.t, st.c.s
	st.mu.Lock()
	slow := st.slow
	st.mu.Unlock()
	if slow {
		if t.queuedBytes() > streamWindow {
			return // not caught up yet: not waited for
		}
		st.setSlow(false)
	}
	last, since := t.queuedBytes(), time.Now()
	for {
		// The server is not silent: the bridge chose not to read it (its
		// liveness ping would wait behind this line).
		s.markHeard()
		st.mu.Lock()
		over := st.over
		st.mu.Unlock()
		if over || t.away.Load() || s.callCount() > 1 {
			return
		}
		if t.waitQueue(streamWindow, streamRecheck, st.c.ctx.Done()) {
			return
		}
		if q := t.queuedBytes(); q < last {
			last, since = q, time.Now()
		} else if time.Since(since) >= streamPatience {
			st.setSlow(true)
			t.b.log.Debug("a page takes nothing of a streamed result: what it has not taken is held for it", "tab", t.id, "queued_bytes", q)
			return
		}
	}
}

func (st *resultStream) setSlow(v bool) {
	st.mu.Lock()
	st.slow = v
	st.mu.Unlock()
}

// write checks p and queues its result bytes.
func (st *resultStream) write(p []byte) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.over || st.fail != nil || st.perr != nil {
		return errStreamStopped
	}
	st.c.s.markHeard() // the server speaks, though no line has ended
	start := st.scan.off
	if err := st.scan.feed(p); err != nil {
		st.fail = &rpcError{Code: stdio.CodeUnreadable, Message: fmt.Sprintf("its response could not be read: %v", err)}
		return errStreamStopped
	}
	if k := st.scan.repeated; k != "" {
		st.fail = &rpcError{Code: stdio.CodeUnreadable, Message: fmt.Sprintf("its response has %s twice", k)}
		return errStreamStopped
	}
	from, to := max(st.scan.resultAt-start, 0), int64(len(p))
	if st.scan.resultEnd > 0 {
		to = min(to, st.scan.resultEnd-start)
	}
	if from >= to {
		return nil
	}
	piece := p[from:to]
	if !st.utf.feed(piece) {
		st.perr = st.notUTF8()
		return errStreamStopped
	}
	// The piece is reserved at its buffer's size, until it has left the
	// tab's queue (or, in a page session, was acknowledged).
	n := int64(cap(p))
	if _, err := st.pool.reserve(n, n, 0, n); err != nil {
		var nr *errNoRoom
		errors.As(err, &nr)
		st.fail = &rpcError{Code: codeNoRoom, Message: nr.Error(), Data: nr.data()}
		return errStreamStopped
	}
	if !st.begin() {
		st.pool.release(n)
		return errStreamStopped
	}
	st.result += int64(len(piece))
	release := func() { st.pool.release(n) }
	if len(piece) <= st.frameMost() {
		// One frame: once it has left the queue (or was acknowledged)
		// nothing refers to the buffer.
		release = func() { st.pool.release(n); st.recycle(p) }
	}
	if !st.queue(piece, release) {
		return errStreamStopped
	}
	return nil
}

// notUTF8 is the error of a result that is not UTF-8, as for one held
// whole.
func (st *resultStream) notUTF8() *protoError {
	at := st.utf.bad
	c := st.c
	return errorf(CodeServerFailed, "%s: the result of %s is not valid UTF-8 (byte %d of it is not): the bridge passes only text to the page; the server must send JSON in UTF-8", c.s.spec.Name, c.tool, at)
}

// begin queues the sequence's head and the reply's first bytes, once; it
// reports whether the tab takes them.
func (st *resultStream) begin() bool {
	if st.begun {
		return true
	}
	st.begun = true
	t := st.c.t
	head := make([]byte, 0, 96)
	head = append(head, `{"type":"tools:chunk","id":"`...)
	head = append(head, st.chunk...)
	head = append(head, `","stream":true,"binary":true}`...)
	t.enqueueMsg(&outMsg{parts: [][]byte{head}, opens: true})
	reply := buildMessage(replyHead{Type: typeCall, ID: st.c.id, OK: true})
	reply = append(reply[:len(reply)-1], `,"result":`...)
	return st.queue(reply, nil)
}

// queue queues p as binary frames within the frame limit (less the 8
// bytes of a number in a page session); false if the tab has closed.
// release goes with the last.
func (st *resultStream) queue(p []byte, release func()) bool {
	t := st.c.t
	most := st.frameMost()
	for len(p) > 0 {
		n := min(len(p), most)
		m := &outMsg{parts: [][]byte{p[:n]}, bin: true}
		if n == len(p) {
			m.release = release
		}
		t.enqueueMsg(m)
		st.frames++
		st.size += int64(n)
		p = p[n:]
	}
	return !t.isClosed()
}

// frameMost is the most bytes of the result a binary frame carries: the
// frame limit less the 8 bytes of a number in a page session.
func (st *resultStream) frameMost() int {
	return max(int(st.c.t.b.opts.FrameLimit)-8, 1)
}

// End gives the message the SDK reads in the line's place: the call's
// stub result when the line was whole and valid, else an error response
// for its id (the call's error).
func (st *resultStream) End(size int64, over bool) []byte {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case over:
		data, _ := json.Marshal(map[string]int64{"size": size, "limit": st.limit})
		st.fail = &rpcError{Code: stdio.CodeTooLarge, Message: fmt.Sprintf("result of %d bytes exceeds the limit of %d bytes", size, st.limit), Data: data}
	case st.fail != nil || st.perr != nil:
	case st.over:
		// The call was answered meanwhile (cancelled, timed out): what
		// the SDK reads no longer matters.
	default:
		if err := st.scan.end(); err != nil {
			st.fail = &rpcError{Code: stdio.CodeUnreadable, Message: fmt.Sprintf("its response of %d bytes could not be read: %v", size, err)}
		} else if !st.utf.end() {
			st.perr = st.notUTF8()
		} else if st.scan.inputReq {
			c := st.c
			st.perr = errorf(CodeServerFailed, "%s: %s asked for more input, which the Builder cannot supply in the middle of a call", c.s.spec.Name, c.tool)
		} else {
			st.whole = true
		}
	}
	if st.whole || st.over {
		return append(append(append([]byte(`{"jsonrpc":"2.0","id":`), st.id...), `,"result":`...), append(stubCallResult, '}')...)
	}
	e := st.fail
	if e == nil {
		e = &rpcError{Code: stdio.CodeUnreadable, Message: st.perr.Message}
	}
	return errorResponse(json.RawMessage(st.id), *e)
}

// finishStream ends the page's sequence when the call is answered: ok
// with the reply's last byte when the result went out whole and valid
// (the call's perr is nil), else not ok (the call's error follows). It
// returns the error the page gets instead of perr, if the stream has one
// of its own, and the result's size and whether it is a tool error.
func (st *resultStream) finishStream(perr *protoError) (*protoError, int64, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.over = true
	if st.perr != nil {
		perr = st.perr // more exact than what the SDK's error response made of it
	} else if perr == nil && !st.whole {
		perr = errorf(CodeServerFailed, "%s: the result of %s ended before it was whole", st.c.s.spec.Name, st.c.tool)
	}
	result := st.result
	if st.begun {
		ok := perr == nil
		if ok {
			st.queue([]byte{'}'}, nil)
		}
		end := make([]byte, 0, 128)
		end = append(end, `{"type":"tools:chunk","id":"`...)
		end = append(end, st.chunk...)
		end = append(end, `","end":true,"ok":`...)
		end = strconv.AppendBool(end, ok)
		end = append(end, `,"count":`...)
		end = strconv.AppendInt(end, int64(st.frames), 10)
		end = append(end, `,"size":`...)
		end = strconv.AppendInt(end, st.size, 10)
		end = append(end, '}')
		st.c.t.enqueueMsg(&outMsg{parts: [][]byte{end}, closes: true})
	}
	st.c.t.streamBusy.Store(false)
	return perr, result, st.scan.isError
}

// binaryFrame is the frame of a binary piece: in a page session, its
// 8-byte big-endian sequence number, then the bytes.
func binaryFrame(seq uint64, p []byte) []byte {
	f := make([]byte, 8+len(p))
	binary.BigEndian.PutUint64(f, seq)
	copy(f[8:], p)
	return f
}
