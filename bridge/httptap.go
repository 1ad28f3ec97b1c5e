package bridge

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/stdio"
)

// tapRoundTripper is the HTTP transport under go-sdk's Streamable HTTP
// client for one server. It sets the entry's headers (and nothing else of
// the bridge's or the page's), and runs the raw tap over JSON and
// text/event-stream response bodies. The session headers go-sdk manages
// (Mcp-Session-Id, MCP-Protocol-Version) pass through untouched.
type tapRoundTripper struct {
	base    http.RoundTripper
	headers map[string]string
	tap     *tap
	auth    *AuthWatch   // sees every answer's status
	resume  *resumeWatch // counts the resumptions of cut event streams
	log     *slog.Logger
	// probe bounds a server/discover: unanswered by then, it is answered
	// "method not found" by the bridge, and what the server does with it
	// afterwards is recorded there (see discover.go).
	probe *discoverProbe
	limit int64 // the result limit: larger messages fail their call with stdio.CodeTooLarge
	// heard, if not nil, is called whenever the server answers anything
	// (an HTTP response, an event): the liveness check's evidence.
	heard func()

	mu        sync.Mutex
	sentUnder map[string]string // guarded by mu; request id key → the revision it was POSTed under, while its answer is awaited
	lastRev   string            // guarded by mu; the revision of the latest request
}

// cancelByClosing reports whether a call sent under revision rev is
// cancelled, over Streamable HTTP, by closing its response stream alone
// (revision 2026-07-28 and later: "no notifications/cancelled message is
// required or expected") rather than by POSTing notifications/cancelled
// (2025-11-25 and earlier, where a closed stream is not a cancellation).
// Over stdio notifications/cancelled is always sent: go-sdk does so when a
// call's context ends, and the stdio transport passes it on. This is the
// one place the bridge decides how a call is cancelled.
func cancelByClosing(rev string) bool { return rev >= protocolVersion20260728 }

func (rt *tapRoundTripper) noteSent(id, rev string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.sentUnder == nil {
		rt.sentUnder = map[string]string{}
	}
	rt.sentUnder[id] = rev
	if rev != "" {
		rt.lastRev = rev
	}
}

func (rt *tapRoundTripper) answered(id string) {
	rt.mu.Lock()
	delete(rt.sentUnder, id)
	rt.mu.Unlock()
}

// revisionOf is the revision the request id was sent under, or, if it is
// not known (answered already, or never sent), the latest request's.
func (rt *tapRoundTripper) revisionOf(id string) string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rev, ok := rt.sentUnder[id]; ok && rev != "" {
		return rev
	}
	return rt.lastRev
}

func (rt *tapRoundTripper) markHeard() {
	if rt.heard != nil {
		rt.heard()
	}
}

// accepted is the answer the bridge gives go-sdk in place of the server's
// for a notification it did not POST, or one the server refused.
func accepted(req *http.Request) *http.Response {
	return &http.Response{StatusCode: http.StatusAccepted, Status: "202 Accepted", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody, Request: req}
}

// passedThrough reports whether an HTTP answer to a POST is one go-sdk
// must see as it is because it means the session is over or cannot go on:
// 404 to a request of a stateful session (the session is gone), 401 and
// 403 (credentials, see credentials.go), and 2xx. Transient answers (429,
// 5xx) go-sdk already treats as a failure of that message alone.
func passedThrough(req *http.Request, status int) bool {
	switch {
	case status >= 200 && status < 300:
		return true
	case status == http.StatusNotFound && req.Header.Get("Mcp-Session-Id") != "":
		return true
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return true
	case status == http.StatusTooManyRequests, status >= 500:
		return true
	}
	return false
}

func (rt *tapRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range rt.headers {
		req.Header.Set(k, v)
	}
	req.Header.Del("Cookie")
	var reqID json.RawMessage
	var method string
	notification := false // a POSTed notification or response: no answer awaited
	if req.Method == http.MethodPost && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		var m struct {
			ID     rawRef `json:"id"`
			Method string `json:"method"`
			Params rawRef `json:"params"`
		}
		if json.Unmarshal(body, &m) == nil {
			if m.ID != nil && m.Method != "" {
				reqID = bytes.Clone(m.ID)
				method = m.Method
				rt.noteSent(rawIDKey(m.ID), req.Header.Get("Mcp-Protocol-Version"))
				rt.tap.outgoingCall(m.Method, rawIDKey(m.ID), json.RawMessage(m.Params))
			} else {
				notification = true
				if rt.skipNotification(req, m.Method, m.Params) {
					return accepted(req), nil
				}
			}
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		req.ContentLength = int64(len(body))
	}
	resuming := req.Method == http.MethodGet && req.Header.Get("Last-Event-ID") != ""
	var resp *http.Response
	var err error
	if method == methodDiscover && rt.probe.bounded() {
		var refused bool
		if resp, refused, err = rt.boundedDiscover(req, reqID); refused {
			rt.answered(rawIDKey(reqID))
			return resp, nil
		}
	} else {
		resp, err = rt.base.RoundTrip(req)
	}
	if err == nil {
		rt.markHeard()
	}
	if err == nil && rt.auth != nil {
		rt.auth.Observe(resp)
	}
	if err == nil && req.Method == http.MethodPost && !passedThrough(req, resp.StatusCode) {
		// One message refused (mcp 2.0.0 answers 400 to every POSTed
		// notification): that message failed, the session did not. go-sdk
		// would end the session on it, so it gets what it can take as
		// that message's own failure.
		detail := refusal(resp)
		switch {
		case notification:
			if rt.log != nil {
				rt.log.Warn("the server refused a notification; the session goes on", "status", resp.Status, "answer", detail.text)
			}
			return accepted(req), nil
		case reqID != nil && detail.rpc != nil && strings.Contains(strings.ToLower(detail.rpc.Message), "protocol version"):
			// A refused revision: go-sdk retries with one the server names,
			// which it does only on the server's own answer.
			resp = &http.Response{StatusCode: resp.StatusCode, Status: resp.Status, Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
				Header: resp.Header, Body: io.NopCloser(bytes.NewReader(detail.body)), ContentLength: int64(len(detail.body)), Request: req}
		case reqID != nil && method != methodDiscover:
			if rt.log != nil {
				rt.log.Warn("the server refused a request", "method", method, "status", resp.Status, "answer", detail.text)
			}
			e := detail.rpc
			if e == nil {
				msg := "the server refused the request: HTTP " + resp.Status
				if detail.text != "" {
					msg += ": " + detail.text
				}
				e = &rpcError{Code: -32603, Message: msg}
			}
			body := errorResponse(reqID, *e)
			resp = &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(body)),
				ContentLength: int64(len(body)), Request: req}
		}
	}
	if reqID != nil && (err != nil || resp.StatusCode != http.StatusOK) {
		rt.answered(rawIDKey(reqID))
	}
	if resuming && rt.resume != nil {
		// The event ID is the server's and says nothing secret, but it is
		// not needed either: the count and the outcome are.
		ok := err == nil && resp.StatusCode == http.StatusOK
		n := rt.resume.record(ok)
		if rt.log != nil {
			if ok {
				rt.log.Info("resumed a cut event stream", "attempt", n)
			} else {
				rt.log.Warn("resuming a cut event stream failed", "attempt", n, "error", errOrStatus(err, resp))
			}
		}
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		// Read into memory reserved in the result pool before it is read
		// (decompressed bytes as they are produced): a body that finds no
		// room fails its call at once, with busy.
		body, held, err := readBody(resp.Body, resp.ContentLength, rt.limit, rt.tap.pool)
		resp.Body.Close()
		var noRoom *errNoRoom
		switch {
		case errors.Is(err, errBodyOverLimit):
			body = tooLargeResponse(reqID, resp.ContentLength, rt.limit)
		case errors.As(err, &noRoom) && reqID != nil:
			body = noRoomResponse(reqID, noRoom)
		case err != nil:
			return nil, err
		default:
			body = rt.tap.incomingHeld(body, held) // the reservation goes with it
		}
		if reqID != nil {
			rt.answered(rawIDKey(reqID))
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	case "text/event-stream":
		sse := newSSETap(resp.Body, rt.tap, rt.limit, reqID)
		sse.heard = rt.markHeard
		if reqID != nil {
			id := rawIDKey(reqID)
			sse.onClose = func() { rt.answered(id) }
		}
		resp.Body = sse
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
	}
	return resp, nil
}

// boundedDiscover sends a server/discover. When the server has not
// answered within the probe's bound, it answers "method not found" itself
// (refused true), so that go-sdk falls back to initialize instead of
// waiting; otherwise it returns the server's answer. The request is not
// cancelled at the bound: it goes on under go-sdk's context (which ends
// with the start), and if the server answers it after all with a result,
// the probe records that the server speaks 2026-07-28 but was slow.
func (rt *tapRoundTripper) boundedDiscover(req *http.Request, id json.RawMessage) (resp *http.Response, refused bool, err error) {
	type answer struct {
		resp *http.Response
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := rt.base.RoundTrip(req)
		answered <- answer{resp, err}
	}()
	bound := time.NewTimer(rt.probe.after)
	defer bound.Stop()
	select {
	case a := <-answered:
		return a.resp, false, a.err
	case <-bound.C:
	}
	rt.probe.markCut()
	go func() {
		a := <-answered
		if a.err != nil {
			return
		}
		defer a.resp.Body.Close()
		if a.resp.StatusCode == http.StatusOK && answersWithResult(a.resp, id, rt.limit, rt.tap.pool) {
			rt.probe.markLate()
		}
	}()
	body := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"server/discover was not answered within %s"}}`, id, rt.probe.after))
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)), Request: req}, true, nil
}

// answersWithResult reports whether a response body (JSON, or an event
// stream, read up to limit bytes) holds the answer to the request id, and
// that answer is a result rather than an error.
func answersWithResult(resp *http.Response, id json.RawMessage, limit int64, pool *resultPool) bool {
	want := rawIDKey(id)
	isResult := func(msg []byte) (answer, result bool) {
		var m struct {
			ID     rawRef          `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(msg, &m) != nil || m.ID == nil || rawIDKey(m.ID) != want {
			return false, false
		}
		return true, len(m.Result) > 0 && string(m.Result) != "null"
	}
	body := io.LimitReader(resp.Body, limit)
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		b, held, err := readBody(body, -1, limit, pool)
		if err != nil {
			return false
		}
		_, result := isResult(b)
		pool.release(held)
		return result
	case "text/event-stream":
		r := bufio.NewReader(body)
		for {
			ev, err := readEvent(r, limit, pool)
			if err != nil {
				return false
			}
			answer, result := isResult(ev.data)
			pool.release(ev.held)
			if answer {
				return result
			}
		}
	}
	return false
}

// skipNotification reports whether a notification go-sdk wants to POST is
// not sent at all: notifications/cancelled for a call sent under revision
// 2026-07-28 or later, whose closed response stream is its cancellation
// (cancelByClosing), and any other notification of such a session, since
// nothing but requests is POSTed to a server of that revision.
func (rt *tapRoundTripper) skipNotification(req *http.Request, method string, params rawRef) bool {
	rev := req.Header.Get("Mcp-Protocol-Version")
	if method == "notifications/cancelled" {
		var p struct {
			RequestID rawRef `json:"requestId"`
		}
		if json.Unmarshal(params, &p) == nil && p.RequestID != nil {
			rev = rt.revisionOf(rawIDKey(p.RequestID))
		}
	} else if rev == "" {
		rt.mu.Lock()
		rev = rt.lastRev
		rt.mu.Unlock()
	}
	if !cancelByClosing(rev) {
		return false
	}
	if rt.log != nil {
		rt.log.Debug("not POSTed: the revision has no client notifications over HTTP", "method", method, "revision", rev)
	}
	return true
}

// refused is what a refused answer's body says: the JSON-RPC error it
// carries, if it is one, and its first line, bounded, for the log.
type refused struct {
	rpc  *rpcError
	text string
	body []byte // as read (bounded), to hand an answer on unchanged
}

// refusal reads a refused answer's body (bounded) and closes it.
func refusal(resp *http.Response) refused {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	r := refused{body: b}
	var m struct {
		Error *rpcError `json:"error"`
	}
	if json.Unmarshal(b, &m) == nil && m.Error != nil && m.Error.Message != "" {
		r.rpc = m.Error
	}
	line, _, _ := bytes.Cut(bytes.TrimSpace(b), []byte("\n"))
	if len(line) > 512 {
		line = line[:512]
	}
	r.text = oneLine(string(line))
	return r
}

func errOrStatus(err error, resp *http.Response) string {
	if err != nil {
		return err.Error()
	}
	return resp.Status
}

// resumeWatch counts the attempts to resume a cut event stream since the
// last one that succeeded, so that a session that fails after them says so.
// The zero value is ready; safe for concurrent use.
type resumeWatch struct {
	mu     sync.Mutex
	failed int // guarded by mu; attempts in a row that did not reconnect
	total  int // guarded by mu; every attempt
}

// record notes one attempt and returns how many were made so far.
func (w *resumeWatch) record(ok bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.total++
	if ok {
		w.failed = 0
	} else {
		w.failed++
	}
	return w.total
}

// attempts is the number of attempts in a row that failed, 0 if the last
// one succeeded or none was made.
func (w *resumeWatch) attempts() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// any reports whether an attempt was made at all.
func (w *resumeWatch) any() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total > 0
}

// tooLargeResponse is the JSON-RPC error the bridge substitutes for a
// message over the limit (the same one the stdio transport synthesizes).
func tooLargeResponse(id json.RawMessage, size, limit int64) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	msg := fmt.Sprintf("result exceeds the limit of %d bytes", limit)
	if size >= 0 {
		msg = fmt.Sprintf("result of %d bytes exceeds the limit of %d bytes", size, limit)
	}
	return errorResponse(id, rpcError{Code: stdio.CodeTooLarge, Message: msg,
		Data: json.RawMessage(fmt.Sprintf(`{"size":%d,"limit":%d}`, size, limit))})
}

// errorResponse is the JSON-RPC error response for id that the bridge puts
// in place of an answer (go-sdk decodes it as the server's).
func errorResponse(id json.RawMessage, e rpcError) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, e})
	return b
}

// codeNoRoom is the JSON-RPC error code the bridge puts in place of an
// answer that found no room in the result pool; its data says how much was
// needed, the pool's limit and whether it could ever fit, so the call fails
// with busy, or too-large when it could never fit.
const codeNoRoom = -32052

func noRoomResponse(id json.RawMessage, e *errNoRoom) []byte {
	return errorResponse(id, rpcError{Code: codeNoRoom, Message: e.Error(), Data: e.data()})
}

// sseTap rewrites a text/event-stream body event by event: the data of each
// event goes through the tap. One reader (go-sdk's) at a time.
type sseTap struct {
	src   io.ReadCloser
	r     *bufio.Reader
	tap   *tap
	limit int64
	reqID json.RawMessage

	heard   func() // if not nil, called for each event
	onClose func() // if not nil, called once when go-sdk closes the stream

	mu  sync.Mutex
	out bytes.Buffer // rewritten bytes not yet read
	err error        // sticky
}

func newSSETap(src io.ReadCloser, t *tap, limit int64, reqID json.RawMessage) *sseTap {
	return &sseTap{src: src, r: bufio.NewReaderSize(src, 64<<10), tap: t, limit: limit, reqID: reqID}
}

func (s *sseTap) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.out.Len() == 0 {
		if s.err != nil {
			return 0, s.err
		}
		s.err = s.nextEvent()
	}
	return s.out.Read(p)
}

func (s *sseTap) Close() error {
	if s.onClose != nil {
		s.onClose()
	}
	return s.src.Close()
}

// nextEvent reads one event (up to a blank line) and writes its rewritten
// form to out.
func (s *sseTap) nextEvent() error {
	// The stream may end inside an event (a proxy cut it): the partial
	// event is dropped, as an event-stream reader must, so that go-sdk
	// resumes after the last complete one instead of failing on half a
	// message.
	ev, err := readEvent(s.r, s.limit, s.tap.pool)
	var noRoom *errNoRoom
	id := s.reqID
	if id == nil {
		id = ev.overID
	}
	if id != nil && (errors.Is(err, errFieldsTooLong) || errors.As(err, &noRoom)) {
		// The call this stream answers ends here, with the reason; the
		// rest of the stream is not read.
		var b []byte
		if noRoom != nil {
			b = noRoomResponse(id, noRoom)
		} else {
			b = errorResponse(id, rpcError{Code: stdio.CodeUnreadable, Message: err.Error()})
		}
		s.out.WriteString("data: ")
		s.out.Write(b)
		s.out.WriteString("\n\n")
		return io.EOF
	}
	if err != nil {
		return err
	}
	if s.heard != nil {
		s.heard()
	}
	s.flush(ev)
	return nil
}

// sseEvent is one event of an event stream: its data lines joined with
// "\n", its other lines as sent (comments left out), and whether its data
// went past the limit (then data is nil and size says how much there was).
// held is the reservation of data's buffer in the result pool.
type sseEvent struct {
	fields  [][]byte
	data    []byte
	held    int64
	hasData bool
	over    bool
	size    int64
	overID  json.RawMessage // for data over the limit: the response id read from its start, if any
}

// overHead is how much of the data of an event over the limit is scanned
// for the id of the response it carries (a response on a resumed GET
// stream has no request id to fall back on).
const overHead = 4 << 10

// readEvent reads one event, up to the blank line that ends it, keeping at
// most limit bytes of its data in a buffer reserved in pool (nil: not
// counted). An error means the stream ended (or failed) inside the event,
// which is then not returned; an error wrapping *errNoRoom means the pool
// had no room for the data, and the id of the response it carried, when
// its start shows one, is in the event returned with it.
//
// Lines other than data are bounded much more tightly: each at
// sseFieldMax, all of one event's together at sseFieldsMax (comments
// included, though they are dropped). Past either, it returns an error
// wrapping errFieldsTooLong at once, without reading the rest: the bridge
// needs only data, id, event and retry, and a stream that never ends an
// event must not hold its lines.
func readEvent(r *bufio.Reader, limit int64, pool *resultPool) (sseEvent, error) {
	var ev sseEvent
	data := budgetBuf{pool: pool, max: limit}
	var other int64 // bytes of this event's lines other than data
	for {
		frag, err := r.ReadSlice('\n')
		// The reader's buffer is larger than "data:", so a first fragment
		// that does not start with it is another line.
		if !bytes.HasPrefix(frag, []byte("data:")) {
			line, err := readField(r, frag, err)
			if err != nil {
				data.free()
				return sseEvent{}, err
			}
			if len(line) == 0 { // end of event
				ev.data, ev.held = data.take()
				return ev, nil
			}
			other += int64(len(line)) + 1
			if other > sseFieldsMax {
				data.free()
				return sseEvent{}, fmt.Errorf("the server's event stream sent an event with more than %d bytes of lines other than data: %w", sseFieldsMax, errFieldsTooLong)
			}
			if line[0] != ':' { // a comment: nothing reads it
				ev.fields = append(ev.fields, line)
			}
			continue
		}
		// A data line: its value goes straight into the event's data.
		v := bytes.TrimPrefix(frag[5:], []byte(" "))
		if ev.hasData && !ev.over {
			if werr := data.write([]byte{'\n'}); werr != nil {
				return ev.noRoom(&data, werr)
			}
		}
		ev.hasData = true
		start := len(data.b)
		for {
			ev.size += int64(len(v))
			switch {
			case ev.over:
			case ev.size > limit+2: // + the line's end, \r\n
				ev.overID, _ = stdio.ResponseID(data.b[:min(len(data.b), overHead)], v[:min(len(v), overHead)])
				ev.over = true
				data.free()
			default:
				if werr := data.write(v); werr != nil {
					return ev.noRoom(&data, werr)
				}
			}
			if err != bufio.ErrBufferFull {
				break
			}
			v, err = r.ReadSlice('\n')
		}
		if err != nil {
			data.free()
			return sseEvent{}, err
		}
		// The line's end is not data.
		end := int64(1)
		if !ev.over {
			line := data.b[start:]
			data.b = data.b[:start+len(bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")))]
			end = int64(len(line) - (len(data.b) - start))
		}
		ev.size -= end
		if !ev.over && ev.size > limit {
			ev.overID, _ = stdio.ResponseID(data.b[:min(len(data.b), overHead)])
			ev.over = true
			data.free()
		}
	}
}

// noRoom ends an event whose data found no room in the pool, with the id
// its start shows, if any.
func (ev sseEvent) noRoom(data *budgetBuf, err error) (sseEvent, error) {
	id, _ := stdio.ResponseID(data.b[:min(len(data.b), overHead)])
	data.free()
	return sseEvent{overID: id}, fmt.Errorf("reading the server's answer: %w", err)
}

// readField reads the rest of a line other than data whose first fragment
// (and its read error) is given: without its end, bounded at sseFieldMax
// (errFieldsTooLong as soon as it is passed, the rest left unread).
func readField(r *bufio.Reader, frag []byte, err error) ([]byte, error) {
	var line []byte
	for {
		if len(line)+len(frag) > sseFieldMax+2 { // + its end, \r\n
			return nil, fmt.Errorf("the server's event stream sent a line other than data of more than %d bytes: %w", sseFieldMax, errFieldsTooLong)
		}
		line = append(line, frag...)
		if err != bufio.ErrBufferFull {
			break
		}
		frag, err = r.ReadSlice('\n')
	}
	if err != nil {
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), nil
}

// The bounds of an event's lines other than data (readEvent): id, event
// and retry are short, and comments are only keep-alives.
const (
	sseFieldMax  = 4 << 10
	sseFieldsMax = 64 << 10
)

// errFieldsTooLong is readEvent's error for an event whose lines other
// than data pass their bounds.
var errFieldsTooLong = errors.New("event fields too long")

func (s *sseTap) flush(ev sseEvent) {
	for _, f := range ev.fields {
		s.out.Write(f)
		s.out.WriteByte('\n')
	}
	data, hasData, held := ev.data, ev.hasData, ev.held
	if ev.over {
		id := s.reqID
		if id == nil {
			id = ev.overID
		}
		size := ev.size
		if size <= s.limit {
			size = -1 // a line over the limit was not counted
		}
		data = tooLargeResponse(id, size, s.limit)
		hasData = true
	} else if hasData {
		data = s.tap.incomingHeld(data, held) // the reservation goes with it
	}
	if hasData {
		// Each line of the data behind its own "data: " (data joined from
		// several lines holds newlines; a line without the prefix would be
		// another field, or a comment).
		for {
			line, rest, more := bytes.Cut(data, []byte{'\n'})
			s.out.WriteString("data: ")
			s.out.Write(line)
			s.out.WriteByte('\n')
			if !more {
				break
			}
			data = rest
		}
	}
	s.out.WriteByte('\n')
}
