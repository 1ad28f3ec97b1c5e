package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// tab is one page's socket. serve runs its read loop on the calling
// goroutine, its write loop on another, and one goroutine per connect or
// call in flight; it returns when all of them are done.
type tab struct {
	b      *Bridge
	adm    Admission
	id     string
	origin string // the Origin of the socket that opened the tab: a resume must come from the same

	sockMu sync.Mutex
	conn   *websocket.Conn // guarded by sockMu; the socket attached now (nil while the page is away)

	ctx    context.Context // cancelled when the tab closes
	cancel context.CancelFunc

	wake chan struct{} // buffered(1): the queue has messages; drained by writeLoop
	done chan struct{} // closed by closeWith, once

	readsCut atomic.Bool // set by cutReads: the read loop's deadline is past and stays there

	// The messages waiting for the page, bounded in bytes
	// (Options.OutboundBytes, each message counted with queueOverhead
	// more), never in number: a page that reads is never closed because a
	// server is chatty or because it sent many requests before reading. A
	// call's progress is replaced in place while it waits, so superseded
	// progress costs nothing.
	qmu     sync.Mutex
	queue   []*outMsg          // guarded by qmu; oldest first; written by anyone via push, drained by writeLoop
	latest  map[string]*outMsg // guarded by qmu; the progress in queue, by the call's id key
	queued  int64              // guarded by qmu; bytes counted for queue, counted in Bridge.queued too
	behind  time.Time          // guarded by qmu; since when the queue has not been empty (zero when it is)
	qclosed bool               // guarded by qmu; set when the tab has ended: nothing more is queued or counted
	qfreed  chan struct{}      // guarded by qmu; made by waitQueue, closed (and dropped) when queued goes down

	closeOnce sync.Once
	closeCode int    // set by closeWith before done is closed
	closeText string // likewise

	work sync.WaitGroup // connects and calls in flight

	// Page sessions (pagesession.go): a tab whose page asked for "resume"
	// in tools:hello outlives its socket for Options.ResumeGrace.
	resumable  atomic.Bool        // set once, by the read loop's tools:hello
	binary     atomic.Bool        // set once, by the read loop's tools:hello: chunk data goes in binary frames (binaryChunks)
	streams    atomic.Bool        // set once, by the read loop's first tools:hello: results may be streamed (stream.go)
	streamBusy atomic.Bool        // a result is streaming to this tab: set by the server's reader (tap.streamLine), cleared by the call's answer
	wOpen      bool               // owned by the write loop of the attached socket: a stream's head was written and not its end
	token      string             // written by the read loop's tools:hello before resumable; then read-only
	away       atomic.Bool        // true while the tab has no socket
	attachCh   chan attachment    // made with resumable, unbuffered: the socket that claimed this tab hands itself over; received by serve while away
	finished   chan struct{}      // made with resumable; closed by serve when the tab has ended
	freeDue    atomic.Bool        // set by ack when it freed a large message: the write loop hands memory back (Bridge.freeOSMemory) off the read loop
	handoff    *attachment        // owned by the read loop: the away tab this socket resumes (the read loop returns once set)
	helloOver  bool               // owned by the read loop: a request other than a refused tools:hello was handled
	received   uint64             // owned by the read loop of the attached socket: page messages handled, for a resume
	seq        atomic.Uint64      // the last sequence number given; written only by the write loop of the attached socket
	held       []*outMsg          // guarded by qmu; sent, not acknowledged, in seq order; counted in queued
	heldBytes  int64              // guarded by qmu; the bytes of held
	lastProg   map[string]*outMsg // guarded by qmu; by call id key: the last progress sent, for a resume
	awaySince  time.Time          // guarded by b.mu
	claimed    bool               // guarded by b.mu; a socket is resuming this tab
	ended      bool               // guarded by b.mu; the tab has ended: its token resumes nothing

	mu       sync.Mutex
	shares   map[string]*session // guarded by mu; by server name
	pending  map[string]*pending // guarded by mu; connects and calls in flight, by id key
	connects int                 // guarded by mu; the connects in pending (at most Options.MaxPendingConnects)
	closedBy map[string]string   // guarded by mu; by server name: why the session this tab held ended on its own (nil until one did)
}

// outMsg is one message queued for a page: its parts concatenated.
type outMsg struct {
	parts  [][]byte
	n      int64  // the bytes counted for it: its size plus queueOverhead
	key    string // a call's progress: the call's id key (see tab.latest); else empty
	seq    uint64 // on a resumable tab, its sequence number once sent (0: not yet)
	plain  bool   // sent without a sequence number (the tools:hello reply)
	bin    bool   // a streamed piece: parts[0] goes in one binary frame (stream.go)
	opens  bool   // a stream's head: binary frames follow
	closes bool   // a stream's end
	// result is set for a call's result: what replaces it when it must
	// be dropped while the page is away (pagesession.go).
	result *heldResult
	// release, if not nil, hands back what else counts the message's
	// bytes (a result's reservation in the result pool) once it has left
	// the queue: written, failed or dropped with the tab.
	release func()
}

// done runs m's release, once.
func (m *outMsg) done() {
	if m.release != nil {
		m.release()
		m.release = nil
	}
}

// queueOverhead is what a queued message is counted beyond its bytes:
// the queue's entry and slices, so that a flood of tiny messages is
// bounded as well as a few large ones.
const queueOverhead = 128

// pending is a connect or a call in flight.
type pending struct {
	cancel  func(code, message string) // answers the request and stops it
	server  *session                   // the session a call runs on; nil for a connect
	connect bool                       // a tools:connect
}

func newTab(b *Bridge, conn *websocket.Conn, adm Admission, origin string) *tab {
	ctx, cancel := context.WithCancel(b.ctx)
	return &tab{
		b: b, conn: conn, adm: adm, id: b.newToken("t"), origin: origin,
		ctx: ctx, cancel: cancel,
		wake:    make(chan struct{}, 1),
		latest:  map[string]*outMsg{},
		done:    make(chan struct{}),
		shares:  map[string]*session{},
		pending: map[string]*pending{},
	}
}

// push queues one message for the page without blocking. A page whose queue
// would pass Options.OutboundBytes is not keeping up: it is closed with 4408
// rather than fed a partial stream.
func (t *tab) push(msg []byte) { t.enqueue("", [][]byte{msg}) }

// pushProgress queues a call's progress: it replaces, in place, that
// call's progress still waiting in the queue (key is the call's id key),
// so a server that reports progress faster than the page reads costs the
// page one message per call, never a closed socket.
func (t *tab) pushProgress(key string, msg []byte) { t.enqueue(key, [][]byte{msg}) }

func (t *tab) enqueue(key string, parts [][]byte) { t.enqueueHeld(key, parts, nil) }

func (t *tab) enqueueHeld(key string, parts [][]byte, release func()) {
	t.enqueueMsg(&outMsg{parts: parts, key: key, release: release})
}

// enqueueMsg queues m (see push). A page away (pagesession.go) is not
// closed when its queue is full: its oldest results are replaced by a
// dropped error to make room, and its session ends only when that does
// not suffice.
func (t *tab) enqueueMsg(m *outMsg) {
	queued := false
	defer func() {
		if !queued {
			m.done()
		}
	}()
	select {
	case <-t.done:
		return
	default:
	}
	n := msgSize(m.parts) + queueOverhead
	key := m.key
	for try := 0; ; try++ {
		t.qmu.Lock()
		if t.qclosed {
			t.qmu.Unlock()
			return
		}
		var full bool
		if old := t.latest[key]; key != "" && old != nil {
			if full = t.queued-old.n+n > t.b.opts.OutboundBytes; !full {
				t.queued += n - old.n
				t.b.queued.Add(n - old.n)
				old.parts, old.n = m.parts, n
			}
		} else if full = t.queued+n > t.b.opts.OutboundBytes; !full {
			m.n = n
			queued = true
			if len(t.queue) == 0 && t.behind.IsZero() {
				t.behind = time.Now()
			}
			t.queue = append(t.queue, m)
			if key != "" {
				t.latest[key] = m
			}
			t.queued += n
			t.b.queued.Add(n)
		}
		queuedBytes, count := t.queued, len(t.queue)
		t.qmu.Unlock()
		if full && t.away.Load() && try == 0 && t.dropResults(n) {
			continue // room was made: queue it now
		}
		if full {
			t.b.log.Warn("tab not reading: closing it", "tab", t.id, "queue", count, "queued_bytes", queuedBytes, "message_bytes", n)
			t.closeWith(CloseSlowReader, "the page is not reading its messages")
			return
		}
		break
	}
	select {
	case t.wake <- struct{}{}:
	default: // the writer has been told already
	}
	if t.away.Load() {
		t.b.trimAway()
	}
	if t.b.queued.Load() > t.b.opts.OutboundTotal {
		t.b.shedSlowest()
	}
}

// pop takes the oldest queued message, or nil. It stays counted until
// sent says it left.
func (t *tab) pop() *outMsg {
	t.qmu.Lock()
	defer t.qmu.Unlock()
	if len(t.queue) == 0 {
		return nil
	}
	m := t.queue[0]
	t.queue[0] = nil
	t.queue = t.queue[1:]
	if len(t.queue) == 0 {
		t.queue = nil // let a grown array go
	}
	if m.key != "" && t.latest[m.key] == m {
		delete(t.latest, m.key)
	}
	return m
}

// sent accounts for a message of n bytes that left the queue.
func (t *tab) sent(n int64) {
	t.qmu.Lock()
	if !t.qclosed {
		t.queued -= n
		t.b.queued.Add(-n)
		if t.queued == t.heldBytes {
			t.behind = time.Time{}
		}
	}
	t.wakeWaiter()
	t.qmu.Unlock()
}

// wakeWaiter wakes waitQueue; the caller holds qmu and took bytes off
// queued.
func (t *tab) wakeWaiter() {
	if t.qfreed != nil {
		close(t.qfreed)
		t.qfreed = nil
	}
}

// waitQueue waits until the bytes counted for the tab's queue (held
// messages included) are at most limit, and reports true; false if they
// were not within patience. It returns true at once when the tab has
// ended, and when stop is closed.
func (t *tab) waitQueue(limit int64, patience time.Duration, stop <-chan struct{}) bool {
	timer := time.NewTimer(patience)
	defer timer.Stop()
	for {
		t.qmu.Lock()
		if t.qclosed || t.queued <= limit {
			t.qmu.Unlock()
			return true
		}
		if t.qfreed == nil {
			t.qfreed = make(chan struct{})
		}
		freed := t.qfreed
		t.qmu.Unlock()
		select {
		case <-freed:
		case <-timer.C:
			return false
		case <-t.done:
			return true
		case <-stop:
			return true
		}
	}
}

// endQueue stops counting the tab's queue: what is left in it is dropped
// with the tab.
func (t *tab) endQueue() {
	t.qmu.Lock()
	t.qclosed = true
	t.b.queued.Add(-t.queued)
	t.queued = 0
	dropped := append(t.queue, t.held...)
	t.queue, t.latest, t.held, t.heldBytes, t.lastProg = nil, nil, nil, 0, nil
	t.qmu.Unlock()
	for _, m := range dropped {
		m.done()
	}
}

// shedSlowest closes tabs, the one furthest behind first (its queue has
// not been empty for the longest: a page that reads empties its queue as it
// goes, even while a large result passes), until the bytes queued for all
// tabs fit Options.OutboundTotal.
func (b *Bridge) shedSlowest() {
	for b.queued.Load() > b.opts.OutboundTotal {
		var worst *tab
		var most int64
		var since time.Time
		b.mu.Lock()
		for t := range b.tabs {
			t.qmu.Lock()
			// A page away is bounded by AwayMemory instead (trimAway), and
			// what a page has not acknowledged yet is not what it failed
			// to read.
			if t.queued > t.heldBytes && !t.qclosed && !t.away.Load() && (worst == nil || t.behind.Before(since)) {
				worst, most, since = t, t.queued, t.behind
			}
			t.qmu.Unlock()
		}
		b.mu.Unlock()
		if worst == nil {
			return
		}
		b.log.Warn("outbound memory full: closing the tab furthest behind", "tab", worst.id, "queued_bytes", most, "behind", time.Since(since).Round(time.Millisecond), "total_bytes", b.queued.Load())
		worst.closeWith(CloseSlowReader, "the page is not reading its messages")
		worst.endQueue() // its queue no longer counts: it is dropped with the tab
	}
}

// shutdownFlush bounds how long a tab's queued messages are written when
// the bridge shuts down, before the close frame.
const shutdownFlush = 2 * time.Second

// shutdown answers every connect and call in flight (server-failed: the
// session ends with the bridge) and closes the tab with 1001; the write loop
// sends those answers before the close frame.
func (t *tab) shutdown() {
	t.mu.Lock()
	pend := make([]*pending, 0, len(t.pending))
	for _, p := range t.pending {
		pend = append(pend, p)
	}
	t.mu.Unlock()
	for _, p := range pend {
		p.cancel(CodeServerFailed, "the bridge is shutting down: run it again once the bridge is back")
	}
	t.closeWith(CloseGoingAway, "the bridge is shutting down")
}

// closeWith starts closing the tab with a close frame.
func (t *tab) closeWith(code int, reason string) {
	t.closeOnce.Do(func() {
		t.closeCode, t.closeText = code, reason
		close(t.done)
		if code != CloseNormal && code != CloseGoingAway {
			t.b.metrics.refused(code)
			t.b.audit(auditRecord{Event: auditRefused, User: t.adm.User, Code: strconv.Itoa(code), Tab: t.id})
		}
	})
}

func (t *tab) serve() {
	defer func() {
		if t.finished != nil { // set by this goroutine's read loop (tools:hello)
			close(t.finished)
		}
	}()
	var loops sync.WaitGroup
	if t.adm.Recheck != nil {
		loops.Add(1)
		go func() {
			defer loops.Done()
			t.recheckLoop()
		}()
	}
	t.sockMu.Lock()
	conn := t.conn
	t.sockMu.Unlock()
	for conn != nil {
		t.runSocket(conn)
		if a := t.handoff; a != nil {
			// This socket resumes another tab (pagesession.go): it is
			// handed over, and this tab, which never had anything in
			// flight, ends.
			a.conn = conn
			a.tab.takeOver(*a)
			break
		}
		t.sockMu.Lock()
		t.conn = nil
		t.sockMu.Unlock()
		conn.Close()
		conn = nil
		if t.resumable.Load() && !t.isClosed() {
			conn = t.waitAway()
		}
	}
	t.closeWith(CloseNormal, "")
	t.cancel()
	// Answer and stop everything in flight, then release every share.
	t.mu.Lock()
	pend := make([]*pending, 0, len(t.pending))
	for _, p := range t.pending {
		pend = append(pend, p)
	}
	shares := t.shares
	t.shares = map[string]*session{}
	t.mu.Unlock()
	for _, p := range pend {
		p.cancel(CodeCancelled, "the page closed")
	}
	t.work.Wait()
	for _, s := range shares {
		t.b.pool.release(t, s)
	}
	loops.Wait()
	t.endQueue()
	t.b.forgetSession(t)
}

// isClosed reports whether closeWith has run.
func (t *tab) isClosed() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// runSocket serves one socket of the tab until it ends: its read loop
// on this goroutine, its write loop on another. When the bridge closes the
// tab (closeWith), the write loop sends the close; when the socket drops
// on a resumable tab, the write loop just stops, and the tab waits for its
// page (serve).
func (t *tab) runSocket(conn *websocket.Conn) {
	t.sockMu.Lock()
	t.conn = conn
	t.sockMu.Unlock()
	sockEnd := make(chan struct{})
	var loops sync.WaitGroup
	loops.Add(1)
	go func() {
		defer loops.Done()
		t.writeLoop(conn, sockEnd)
	}()
	t.readLoop(conn)
	// The write loop ends on sockEnd only when the socket is gone or handed
	// over; when the tab is closing, it ends on t.done, having sent the
	// close (were both ready, it might pick sockEnd and skip the
	// tools:closing: seen under wine, a binary frame's 4400 became 1006).
	switch {
	case t.handoff != nil:
		// The socket goes on, for the tab it resumes: nothing more is
		// written to it from here.
		close(sockEnd)
	case t.resumable.Load() && !t.isClosed():
		conn.Close() // the socket is gone: a write blocked on it ends now
		close(sockEnd)
	case t.resumable.Load():
		// The bridge is closing the tab: the write loop sends the close.
	default:
		t.closeWith(CloseNormal, "")
	}
	loops.Wait()
}

// hasQueued reports whether messages wait in the queue.
func (t *tab) hasQueued() bool {
	t.qmu.Lock()
	defer t.qmu.Unlock()
	return len(t.queue) > 0
}

// msgSize is the bytes of a queued message.
func msgSize(parts [][]byte) int64 {
	n := int64(0)
	for _, p := range parts {
		n += int64(len(p))
	}
	return n
}

func (t *tab) recheckLoop() {
	every := t.adm.RecheckInterval
	if every <= 0 {
		every = 60 * time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-t.done:
			return
		case <-tick.C:
			if r := t.adm.Recheck(t.ctx); r != nil {
				code := r.CloseCode
				if code == 0 {
					code = CloseForbidden
				}
				t.b.log.Info("tab lost access", "tab", t.id, "user", t.adm.User, "code", code)
				t.closeWith(code, r.Reason)
				return
			}
		}
	}
}

// frameWriter collects one frame and writes it as a single WebSocket frame
// on Close. gorilla's NextWriter sends a message larger than its 32 KiB
// write buffer as 32 KiB continuation frames, and tornado before 6.3 (Debian
// 12's 6.2, under jupyter-server-proxy) joins continuation frames by bytes
// concatenation, quadratic in their number: an 8 MiB chunk in 32 KiB pieces
// cost it about 1 GiB of copying (BenchmarkJupyterHop, cProfile of the
// server: tornado's _receive_frame). Owned by the writeLoop.
type frameWriter struct {
	buf   []byte
	write func([]byte) error
}

func (f *frameWriter) Write(p []byte) (int, error) {
	f.buf = append(f.buf, p...)
	return len(p), nil
}

func (f *frameWriter) Close() error {
	err := f.write(f.buf)
	f.buf = f.buf[:0]
	return err
}

// reserve makes room for a frame of up to n bytes at once, so that the
// buffer is allocated once instead of by doubling (each outgrown buffer
// would be live until the next collection).
func (f *frameWriter) reserve(n int) {
	if cap(f.buf) < n {
		f.buf = make([]byte, 0, n)
	}
}

// release drops a buffer a large message grew, so that an idle tab holds
// none.
func (f *frameWriter) release() {
	if cap(f.buf) > 64<<10 {
		f.buf = nil
	}
}

// writeLoop owns every write to the socket conn, until the tab closes
// (it sends the close) or sockEnd is closed (the socket dropped).
func (t *tab) writeLoop(conn *websocket.Conn, sockEnd <-chan struct{}) {
	ping := time.NewTicker(t.b.opts.PingInterval)
	defer ping.Stop()
	buf := make([]byte, 0, 32<<10) // scratch for chunk frames
	frameLimit := int(t.b.opts.FrameLimit)
	var flushBy time.Time // while flushing before a 1001 close: the deadline of the flush
	writeTyped := func(typ int, p []byte) error {
		d := time.Now().Add(t.b.opts.WriteTimeout)
		if !flushBy.IsZero() {
			d = flushBy
		}
		_ = conn.SetWriteDeadline(d)
		return conn.WriteMessage(typ, p)
	}
	writeFrame := func(p []byte) error { return writeTyped(websocket.TextMessage, p) }
	// Every message and chunk goes out as one WebSocket frame: frame
	// collects it and writes it whole on Close.
	frame := &frameWriter{write: writeFrame}
	nextWriter := func() (io.WriteCloser, error) { return frame, nil }
	// send writes one message: as one frame when it fits, else as chunks.
	send := func(parts [][]byte) error {
		defer frame.release()
		total := int(msgSize(parts))
		if total > frameLimit {
			// While a stream is open its binary frames are the page's
			// only binary frames: a large message then goes as text chunks.
			if t.binary.Load() && !t.wOpen {
				return binaryChunks(parts, t.b.newToken("b"), frameLimit, writeTyped)
			}
			frame.reserve(frameLimit)
			return chunkFrames(parts, t.b.newToken("b"), frameLimit, buf, nextWriter)
		}
		if len(parts) == 1 {
			return writeFrame(parts[0])
		}
		frame.reserve(total)
		for _, p := range parts {
			frame.Write(p)
		}
		return frame.Close()
	}
	// emit writes one queued message, as sequence gave it.
	emit := func(m *outMsg, wire [][]byte) error {
		if m.bin {
			return writeTyped(websocket.BinaryMessage, wire[0])
		}
		err := send(wire)
		if err == nil && m.opens {
			t.wOpen = true
		} else if err == nil && m.closes {
			t.wOpen = false
		}
		return err
	}
	for {
		select {
		case <-t.wake:
			if t.freeDue.Swap(false) {
				t.b.freeOSMemory()
			}
			m := t.pop()
			if m == nil {
				continue
			}
			if t.hasQueued() {
				// One message per turn, so that pings and the close are
				// not held up behind a long queue.
				select {
				case t.wake <- struct{}{}:
				default:
				}
			}
			wire := t.sequence(m)
			err := emit(m, wire)
			if err == nil {
				t.b.metrics.pageOut.Add(float64(msgSize(wire)))
			}
			wire = nil
			if !t.keep(m) {
				parts := m.parts
				t.sent(m.n)
				m.done()
				m = nil
				// Last: the parts must be dead when the memory is released (a
				// use after this call kept a 40 MB result alive through it,
				// and the next result's peak rose by 23 MiB).
				t.b.releaseMemory(parts)
			}
			if err != nil {
				// A write that stalls past WriteTimeout is a page that
				// stopped reading in the middle of a frame: no close frame
				// can follow, so the connection is cut, and the log says why.
				// A resumable tab keeps what it failed to send for its page's
				// return (keep).
				t.b.log.Info("writing to the tab failed: cutting it", "tab", t.id, "error", err)
				if !t.resumable.Load() {
					t.closeWith(CloseNormal, "")
				}
				conn.Close() // unblocks the read loop
				return
			}
		case <-ping.C:
			_ = conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(t.b.opts.WriteTimeout))
		case <-sockEnd:
			if !t.isClosed() {
				return // the socket dropped; the tab waits for its page
			}
			// The tab is closing too: send the close (below, next turn).
			sockEnd = nil
		case <-t.done:
			if t.closeCode == CloseGoingAway {
				// The bridge is shutting down: what is queued (the answers
				// of the calls in flight, see shutdown) goes out before the
				// close, within shutdownFlush.
				flushBy = time.Now().Add(shutdownFlush)
			flush:
				for time.Now().Before(flushBy) {
					m := t.pop()
					if m == nil {
						break flush
					}
					err := emit(m, t.sequence(m))
					t.sent(m.n)
					m.done()
					if err != nil {
						break flush
					}
				}
			}
			if t.closeCode != CloseNormal {
				writeClosing(conn, t.closeCode, t.closeText, time.Second)
			} else {
				_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(CloseNormal, ""), time.Now().Add(time.Second))
			}
			// Let the read loop see the peer's close frame, but not forever.
			_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			return
		}
	}
}

// readLoop owns every read from the socket c and dispatches each message.
// It returns when the socket ends, or once a tools:hello resumed another
// tab with it (t.handoff).
func (t *tab) readLoop(c *websocket.Conn) {
	c.SetReadLimit(t.b.opts.InboundLimit)
	deadline := func() {
		if !t.readsCut.Load() {
			_ = c.SetReadDeadline(time.Now().Add(t.b.opts.PongTimeout))
		}
	}
	deadline()
	c.SetPongHandler(func(string) error { deadline(); return nil })
	re := newReassembler(t.b.opts.InboundLimit, 4, t.b.opts.ChunkTimeout)
	re.pool = t.b.chunks
	re.admitNew = t.b.memoryRefusal
	re.onExpire = func(id string) {
		t.push(errorReply(typeChunk, json.RawMessage(id), errorf(CodeBadRequest, "chunk sequence %s was not completed in time", id)))
	}
	defer re.closeAll()
	defer t.releaseInbound(true)
	lastExpire := time.Now()
	for {
		typ, r, err := c.NextReader()
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				t.closeWith(CloseTooBig, "a frame exceeded the inbound limit; send large messages as tools:chunk frames")
			}
			return
		}
		deadline()
		if typ == websocket.BinaryMessage {
			t.closeWith(CloseBinary, "binary frames are not supported: send text frames of JSON")
			return
		}
		frame, err := t.readFrame(r)
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				t.closeWith(CloseTooBig, "a frame exceeded the inbound limit; send large messages as tools:chunk frames")
			}
			return
		}
		t.b.metrics.pageIn.Add(float64(len(frame)))
		if time.Since(lastExpire) > time.Second {
			lastExpire = time.Now()
			for _, id := range re.expire() {
				t.push(errorReply(typeChunk, json.RawMessage(id), errorf(CodeBadRequest, "chunk sequence %s was not completed in time", id)))
			}
		}
		t.handleFrame(re, frame)
		t.releaseInbound(false)
		if t.handoff != nil {
			return
		}
	}
}

// handleFrame decodes one frame and acts on it, or on the whole message a
// tools:chunk frame completes.
func (t *tab) handleFrame(re *reassembler, frame []byte) {
	msg, perr := decodeEnvelope(frame)
	if msg.Type == typeAck {
		t.handleAck(frame)
		return
	}
	if msg.Type != typeChunk || perr != nil {
		t.countReceived(msg.Type)
	}
	if perr != nil {
		t.push(errorReply(msg.Type, msg.ID, perr))
		return
	}
	if msg.Type == typeChunk {
		whole, ignore, perr := re.add(msg.ID, frame)
		switch {
		case ignore:
			return
		case perr != nil:
			t.countReceived(typeChunk) // the sequence ends here
			t.push(errorReply(typeChunk, msg.ID, perr))
			return
		case whole == nil:
			return
		}
		inner, perr := decodeEnvelope(whole)
		t.countReceived(inner.Type)
		if perr == nil && inner.Type == typeChunk {
			perr = errorf(CodeBadRequest, "a chunk sequence cannot carry another tools:chunk")
		}
		if perr != nil {
			t.push(errorReply(inner.Type, inner.ID, perr))
			return
		}
		msg = inner
	}
	t.dispatch(msg)
}

// dispatch acts on one whole page message. Only the six request types are
// ever acted on.
func (t *tab) dispatch(m pageMessage) {
	if m.Type == typeHello {
		t.handleHello(m)
		return
	}
	t.helloOver = true
	switch m.Type {
	case typeServers:
		t.push(t.serversReply(m))
	case typeConnect:
		t.handleConnect(m)
	case typeCall:
		t.handleCall(m)
	case typeCancel:
		t.handleCancel(m)
	case typeDisconnect:
		t.handleDisconnect(m)
	case typeOpenSettings:
		t.handleOpenSettings(m)
	default:
		t.push(errorReply(m.Type, m.ID, errorf(CodeUnknownType, "unknown message type %q: the bridge answers only tools:servers, tools:connect, tools:call, tools:cancel, tools:disconnect and tools:openSettings", m.Type)))
	}
}

// addPending registers a request in flight; the error (already sent as
// the reply) if its id is already in flight, the tab has too many connects
// in flight, or the bridge is near its memory ceiling.
func (t *tab) addPending(m pageMessage, p *pending) *protoError {
	t.mu.Lock()
	defer t.mu.Unlock()
	refuse := func(perr *protoError) *protoError {
		t.push(errorReply(m.Type, m.ID, perr))
		return perr
	}
	if _, busy := t.pending[idKey(m.ID)]; busy {
		return refuse(errorf(CodeBadRequest, "id %s is already in flight: each request in flight needs its own id", m.ID))
	}
	if perr := t.b.memoryRefusal(); perr != nil {
		return refuse(perr)
	}
	if p.connect {
		if max := t.b.opts.MaxPendingConnects; t.connects >= max {
			return refuse(errorf(CodeBusy, "this tab already has %d connects in flight, the most it may have: retry once one is answered", max))
		}
		t.connects++
	}
	t.pending[idKey(m.ID)] = p
	return nil
}

func (t *tab) removePending(id json.RawMessage, p *pending) {
	t.mu.Lock()
	if t.pending[idKey(id)] == p {
		delete(t.pending, idKey(id))
		if p.connect {
			t.connects--
		}
	}
	t.mu.Unlock()
}

// cutReads ends the tab's reads at once: a tab closed to make room for
// others' frames must drop the pieces it holds now, not when its page
// next sends a byte.
func (t *tab) cutReads() {
	t.readsCut.Store(true)
	t.sockMu.Lock()
	if t.conn != nil {
		_ = t.conn.SetReadDeadline(time.Now())
	}
	t.sockMu.Unlock()
}
