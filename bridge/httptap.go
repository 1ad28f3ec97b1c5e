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
			body, _ := json.Marshal(struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   rpcError        `json:"error"`
			}{"2.0", reqID, *e})
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
		body, err := io.ReadAll(io.LimitReader(resp.Body, rt.limit+1))
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if reqID != nil {
			rt.answered(rawIDKey(reqID))
		}
		if int64(len(body)) > rt.limit {
			body = tooLargeResponse(reqID, -1, rt.limit)
		} else {
			body = rt.tap.incoming(body)
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
		if a.resp.StatusCode == http.StatusOK && answersWithResult(a.resp, id, rt.limit) {
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
func answersWithResult(resp *http.Response, id json.RawMessage, limit int64) bool {
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
		b, err := io.ReadAll(body)
		if err != nil {
			return false
		}
		_, result := isResult(b)
		return result
	case "text/event-stream":
		r := bufio.NewReader(body)
		for {
			ev, err := readEvent(r, limit)
			if err != nil {
				return false
			}
			if answer, result := isResult(ev.data); answer {
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
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{Code: stdio.CodeTooLarge, Message: msg,
		Data: json.RawMessage(fmt.Sprintf(`{"size":%d,"limit":%d}`, size, limit))}})
	return b
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
	ev, err := readEvent(s.r, s.limit)
	if errors.Is(err, errFieldsTooLong) && s.reqID != nil {
		// The call this stream answers ends here, with the reason; the
		// rest of the stream is not read.
		b, _ := json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   rpcError        `json:"error"`
		}{"2.0", s.reqID, rpcError{Code: stdio.CodeUnreadable, Message: err.Error()}})
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
// "\n", its other lines as sent, and whether its data went past the limit
// (then data is nil and size says how much there was).
type sseEvent struct {
	fields  [][]byte
	data    []byte
	hasData bool
	over    bool
	size    int64
	overID  json.RawMessage // for data over the limit: the response id read from its start, if any
}

// overHead is how much of a data line over the limit is kept to read the
// id of the response it carries (a response on a resumed GET stream has
// no request id to fall back on).
const overHead = 4 << 10

// readEvent reads one event, up to the blank line that ends it, keeping at
// most limit bytes of its data. An error means the stream ended (or failed)
// inside the event, which is then not returned.
//
// Lines other than data are bounded much more tightly: each at
// sseFieldMax, all of one event's together at sseFieldsMax (comments
// included, though they are dropped). Past either, it returns an error
// wrapping errFieldsTooLong at once, without reading the rest: the bridge
// needs only data, id, event and retry, and a stream that never ends an
// event must not hold its lines.
func readEvent(r *bufio.Reader, limit int64) (sseEvent, error) {
	var ev sseEvent
	var other int64 // bytes of this event's lines other than data
	for {
		line, err := readLine(r, limit-ev.size+1, sseFieldMax)
		if err == errFieldsTooLong {
			return sseEvent{}, fmt.Errorf("the server's event stream sent a line other than data of more than %d bytes: %w", sseFieldMax, errFieldsTooLong)
		}
		if err == errLineTooLong {
			if !ev.over && bytes.HasPrefix(line, []byte("data:")) {
				ev.overID, _ = stdio.ResponseID(ev.data, bytes.TrimPrefix(line[5:], []byte(" ")))
			}
			ev.over = true
			ev.data = nil
			continue
		}
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 { // end of event
			return ev, nil
		}
		if bytes.HasPrefix(line, []byte("data:")) {
			v := bytes.TrimPrefix(line[5:], []byte(" "))
			ev.size += int64(len(v))
			if ev.size > limit {
				if !ev.over {
					ev.overID, _ = stdio.ResponseID(ev.data, v[:min(len(v), overHead)])
				}
				ev.over = true
				ev.data = nil
				continue
			}
			if ev.hasData {
				ev.data = append(ev.data, '\n')
			}
			ev.data = append(ev.data, v...)
			ev.hasData = true
			continue
		}
		other += int64(len(line)) + 1
		if other > sseFieldsMax {
			return sseEvent{}, fmt.Errorf("the server's event stream sent an event with more than %d bytes of lines other than data: %w", sseFieldsMax, errFieldsTooLong)
		}
		if line[0] == ':' {
			continue // a comment: nothing reads it
		}
		ev.fields = append(ev.fields, bytes.Clone(line))
	}
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
	data, hasData := ev.data, ev.hasData
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
		data = s.tap.incoming(data)
	}
	if hasData {
		s.out.WriteString("data: ")
		s.out.Write(data)
		s.out.WriteByte('\n')
	}
	s.out.WriteByte('\n')
}

var errLineTooLong = fmt.Errorf("line too long")

// readLine reads one line without its end (\n, \r\n or \r is not handled:
// the event-stream servers here end lines with \n or \r\n). A data line
// longer than max is consumed and reported as errLineTooLong with only its
// first overHead bytes kept. Any other line longer than fieldMax is
// reported as errFieldsTooLong as soon as that is known, with the rest of
// it left unread.
func readLine(r *bufio.Reader, max, fieldMax int64) ([]byte, error) {
	var line []byte
	var n int64
	field := false
	for first := true; ; first = false {
		frag, err := r.ReadSlice('\n')
		// The reader's buffer is larger than "data:", so a first fragment
		// that does not start with it is another line.
		field = field || first && !bytes.HasPrefix(frag, []byte("data:"))
		n += int64(len(frag))
		if field && n > fieldMax+2 { // + its end, \r\n
			return nil, errFieldsTooLong
		}
		if n <= max {
			line = append(line, frag...)
		} else if len(line) < overHead {
			line = append(line, frag[:min(len(frag), overHead-len(line))]...)
		} else if len(line) > overHead {
			line = bytes.Clone(line[:overHead]) // not the whole line's array
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if n > max {
			if err != nil {
				return nil, err
			}
			return line, errLineTooLong
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		return line, err
	}
}
