package bridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/megane-labs/megane-jupyter-bridge/stdio"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The raw tap sits under go-sdk, on the transport. It keeps the exact bytes
// of tools/list and tools/call results for the bridge and hands the SDK a
// small stub in their place, so results reach the page byte for byte, are
// never decoded into typed structs, and never fail on content the SDK does
// not know.

// rawSlot receives the raw outcome of one upstream request.
type rawSlot struct {
	list bool  // a tools/list slot (else tools/call); set before use
	call *call // the tools/call it answers, for a streamed result (stream.go); set before use
	init bool  // the initialize slot: the result is kept and the SDK sees it less serverInfo's extras

	mu       sync.Mutex
	result   []byte // guarded by mu; the raw "result" value
	rpcErr   *rpcError
	received bool
	pool     *resultPool // the pool held is reserved in
	held     int64       // guarded by mu; the result's buffer reserved in pool, until closed
	closed   bool        // guarded by mu; the call is over: a late result's reservation goes back at once
}

// hold takes over the reservation of the result's buffer.
func (s *rawSlot) hold(pool *resultPool, n int64) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		pool.release(n)
		return
	}
	s.pool, s.held = pool, s.held+n
	s.mu.Unlock()
}

// fail replaces the slot's outcome with e.
func (s *rawSlot) fail(e *rpcError) {
	s.mu.Lock()
	s.result, s.rpcErr, s.received = nil, e, true
	s.mu.Unlock()
}

// detach hands the result's reservation to whoever holds the result now
// (a tab's queue): the function returned gives it back, once; close no
// longer does.
func (s *rawSlot) detach() func() {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	pool, held := s.pool, s.held
	s.held = 0
	s.mu.Unlock()
	if held == 0 {
		return nil
	}
	var once sync.Once
	return func() { once.Do(func() { pool.release(held) }) }
}

// close ends the slot: the reservation it still has goes back to the pool
// (the result was dropped, or there was none).
func (s *rawSlot) close() {
	s.mu.Lock()
	pool, held := s.pool, s.held
	s.closed, s.held, s.result = true, 0, nil
	s.mu.Unlock()
	pool.release(held)
}

type rpcError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (s *rawSlot) set(result []byte, e *rpcError) {
	s.mu.Lock()
	s.result, s.rpcErr, s.received = result, e, true
	s.mu.Unlock()
}

func (s *rawSlot) get() ([]byte, *rpcError, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.result, s.rpcErr, s.received
}

// tap correlates upstream requests with the bridge's slots. Safe for
// concurrent use.
type tap struct {
	// onProgress receives every notifications/progress, in wire order, from
	// the goroutine that reads the server (set at creation, may be nil).
	// go-sdk hands notifications to a handler goroutine but retires
	// responses at once, so progress routed through go-sdk can arrive after
	// its call's result and be lost; routed here it never can.
	onProgress func(*mcp.ProgressNotificationParams)

	// pool, if not nil, is where the buffers of answers read over
	// Streamable HTTP are reserved (results.go); set at creation.
	pool *resultPool

	mu      sync.Mutex
	byToken map[string]*rawSlot // guarded by mu; tools/call slots by progress token
	byID    map[string]*rawSlot // guarded by mu; by JSON-RPC request id, set when the request is written
	list    *rawSlot            // guarded by mu; the tools/list in progress (listing is serialized)
	init    *rawSlot            // guarded by mu; the initialize to come
}

func newTap(onProgress func(*mcp.ProgressNotificationParams)) *tap {
	return &tap{onProgress: onProgress, byToken: map[string]*rawSlot{}, byID: map[string]*rawSlot{}}
}

// expectCall registers the slot for the tools/call carrying token.
func (t *tap) expectCall(token string, s *rawSlot) {
	t.mu.Lock()
	t.byToken[token] = s
	t.mu.Unlock()
}

// expectList registers the slot for the next tools/list request.
func (t *tap) expectList(s *rawSlot) {
	t.mu.Lock()
	t.list = s
	t.mu.Unlock()
}

// expectInit registers the slot for the session's handshake: the
// server/discover of revision 2026-07-28 and the initialize of earlier ones
// (go-sdk may send both, the second after the first failed). The slot
// keeps the last successful result. expectInit(nil) ends the handshake.
func (t *tap) expectInit(s *rawSlot) {
	if s != nil {
		s.init = true
	}
	t.mu.Lock()
	t.init = s
	t.mu.Unlock()
}

// forget drops every reference to the call with this token.
func (t *tap) forget(token string) {
	t.mu.Lock()
	if s := t.byToken[token]; s != nil {
		delete(t.byToken, token)
		for id, v := range t.byID {
			if v == s {
				delete(t.byID, id)
			}
		}
	}
	t.mu.Unlock()
}

// outgoing is called with each message written to the server.
func (t *tap) outgoing(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() {
		return
	}
	t.outgoingCall(req.Method, sdkIDKey(req.ID), req.Params)
}

func (t *tap) outgoingCall(method, id string, params json.RawMessage) {
	switch method {
	case "tools/call":
		token := peekProgressToken(params)
		t.mu.Lock()
		if s := t.byToken[token]; s != nil && token != "" {
			t.byID[id] = s
		}
		t.mu.Unlock()
	case "initialize", "server/discover":
		t.mu.Lock()
		if t.init != nil {
			t.byID[id] = t.init
		}
		t.mu.Unlock()
	case "tools/list":
		t.mu.Lock()
		if t.list != nil {
			t.byID[id] = t.list
			t.list = nil
		}
		t.mu.Unlock()
	}
}

// Stubs handed to the SDK in place of captured results.
var (
	stubCallResult = []byte(`{"content":[]}`)
)

// incomingHeld is called with each complete message read from a
// Streamable HTTP server and returns the bytes the SDK should decode. It
// takes ownership of raw, and of the held bytes its buffer has reserved in
// t.pool: a result captured for its call keeps the reservation until the
// call's answer has left its tab's queue (rawSlot.detach, close); for
// anything else it goes back at once (what go-sdk decodes is small, see
// response). A progress notification is routed by the tap and still
// handed to the SDK (which ignores it): an event cannot be left out.
func (t *tap) incomingHeld(raw []byte, held int64) []byte {
	if t.progress(raw) {
		t.pool.release(held)
		return raw
	}
	out, slot := t.response(raw)
	if slot != nil {
		slot.hold(t.pool, held)
	} else {
		t.pool.release(held)
	}
	return out
}

// incomingStdio is incomingHeld for the stdio transport, which can drop a
// message: a progress notification the tap routed is not handed to the SDK
// at all, which would only decode it (the bridge's client has no progress
// handler), about a tenth of the bridge's CPU under load.
func (t *tap) incomingStdio(raw []byte) []byte {
	if t.progress(raw) {
		return nil
	}
	out, slot := t.response(raw)
	if slot != nil && t.pool != nil {
		// A result read from stdout is held for its call like one read
		// over HTTP: reserved in the same pool (after the line was read:
		// a server's lines are read one at a time), or the call fails
		// with busy and the line is dropped.
		n := int64(cap(raw))
		if _, err := t.pool.reserve(n, n, 0, int64(len(raw))); err != nil {
			var nr *errNoRoom
			errors.As(err, &nr)
			slot.fail(&rpcError{Code: codeNoRoom, Message: nr.Error(), Data: nr.data()})
		} else {
			slot.hold(t.pool, n)
		}
	}
	return out
}

// progress routes raw if it is a progress notification and reports whether
// it was one.
func (t *tap) progress(raw []byte) bool {
	if t.onProgress == nil || markProgress.index(raw) < 0 {
		return false
	}
	var n struct {
		ID     rawRef                          `json:"id"`
		Method string                          `json:"method"`
		Params *mcp.ProgressNotificationParams `json:"params"`
	}
	if json.Unmarshal(raw, &n) != nil || n.ID != nil || n.Method != "notifications/progress" {
		return false
	}
	if n.Params != nil {
		t.onProgress(n.Params)
	}
	return true
}

// response captures raw if it answers a call or listing the tap expects,
// and returns the stub the SDK should decode instead, and the call's slot
// when it kept a call's result; anything else is returned as it is, but a
// large result that answers nothing the tap expects (a late answer to a
// call given up on) is cut to an empty one: go-sdk drops it anyway, and
// would decode it whole first.
func (t *tap) response(raw []byte) ([]byte, *rawSlot) {
	// Cheap test first: only responses are of interest, and every response
	// has "result" or "error". Notifications and requests pass untouched.
	if !bytes.Contains(raw, []byte(`"result"`)) && !bytes.Contains(raw, []byte(`"error"`)) {
		return raw, nil
	}
	var m struct {
		ID     rawRef  `json:"id"`
		Method *string `json:"method"`
		Result rawRef  `json:"result"`
		Error  rawRef  `json:"error"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return t.unreadable(raw, err), nil
	}
	if m.Method != nil || m.ID == nil {
		return raw, nil
	}
	key := rawIDKey(m.ID)
	t.mu.Lock()
	s := t.byID[key]
	if s != nil {
		delete(t.byID, key)
	}
	t.mu.Unlock()
	if s == nil {
		if len(m.Result) > unexpectedResultMax {
			return append(append(append([]byte(`{"jsonrpc":"2.0","id":`), m.ID...), `,"result":`...), append(stubCallResult, '}')...), nil
		}
		return raw, nil
	}
	if s.init && (m.Error != nil || m.Result == nil) {
		return raw, nil // a failed step of the handshake: go-sdk falls back
	}
	if s.init && bytes.Contains(raw, []byte(`"supportedVersions"`)) {
		// server/discover: kept raw for the page, decoded by go-sdk as
		// sent (its serverInfo is a _meta entry go-sdk reads leniently).
		s.set(bytes.Clone(m.Result), nil)
		return raw, nil
	}
	if m.Error != nil {
		var e rpcError
		if json.Unmarshal(m.Error, &e) != nil {
			e = rpcError{Code: -32603, Message: "malformed error object"}
		}
		s.set(nil, &e)
		return raw, nil
	}
	if m.Result == nil {
		s.set(nil, &rpcError{Code: -32603, Message: "response has neither result nor error"})
		return raw, nil
	}
	// Callers hand over raw (the stdio transport never reuses its line
	// buffers; the HTTP tap reads each body or event into a slice of its
	// own), so the result can stay a sub-slice of it: no copy of 40 MB.
	result := []byte(m.Result)
	if s.init {
		s.set(bytes.Clone(result), nil)
		return initStub(m.ID, result, raw), nil
	}
	s.set(result, nil)
	// Hand the SDK a stub of the right shape.
	stub := stubCallResult
	if s.list {
		stub = listStub(result)
	}
	out := make([]byte, 0, len(m.ID)+len(stub)+40)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, m.ID...)
	out = append(out, `,"result":`...)
	out = append(out, stub...)
	if s.list {
		return append(out, '}'), nil
	}
	return append(out, '}'), s
}

// unexpectedResultMax is the largest result the tap hands go-sdk for a
// response it does not expect.
const unexpectedResultMax = 64 << 10

// unreadable handles a message the JSON decoder could not read (nested
// deeper than it goes, say). If it is a response whose id can be read at
// the top level, the request it answers fails at once, saying why, instead
// of waiting for its timeout: its slot gets the error, and the SDK an
// error response for the id. Anything else is returned as it is.
func (t *tap) unreadable(raw []byte, err error) []byte {
	id, ok := stdio.ResponseID(raw)
	if !ok {
		return raw
	}
	e := rpcError{Code: stdio.CodeUnreadable, Message: fmt.Sprintf("its response of %d bytes could not be read: %v", len(raw), err)}
	key := rawIDKey(id)
	t.mu.Lock()
	s := t.byID[key]
	delete(t.byID, key)
	t.mu.Unlock()
	if s != nil {
		s.set(nil, &e)
	}
	return errorResponse(id, e)
}

// initStub is the initialize response the SDK decodes: the server's own,
// with serverInfo cut down to its name and version (strings or empty).
// The bridge relays serverInfo raw; the SDK would decode its title, icons
// and websiteUrl into typed fields and fail the whole session on one it
// cannot read. raw is returned unchanged if result is not an object.
func initStub(id, result, raw []byte) []byte {
	var fields map[string]json.RawMessage
	if json.Unmarshal(result, &fields) != nil || fields == nil {
		return raw
	}
	var info struct {
		Name    any `json:"name"`
		Version any `json:"version"`
	}
	_ = json.Unmarshal(fields["serverInfo"], &info)
	name, _ := info.Name.(string)
	version, _ := info.Version.(string)
	fields["serverInfo"], _ = json.Marshal(struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}{name, version})
	stub, err := json.Marshal(fields)
	if err != nil {
		return raw
	}
	out := make([]byte, 0, len(id)+len(stub)+40)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"result":`...)
	out = append(out, stub...)
	return append(out, '}')
}

// listStub is the tools/list page the SDK decodes: each tool cut down to
// its name and input schema (the bridge relays the listing raw), so that
// go-sdk knows the arguments a tool declares with x-mcp-header and sends
// their Mcp-Param-* headers under revision 2026-07-28, but never fails on
// a field it cannot decode (an icon, an unknown content type). Tools
// without a string name or an object schema are left out of the stub.
func listStub(result []byte) []byte {
	var page struct {
		Tools []struct {
			Name        json.RawMessage `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
		NextCursor *string `json:"nextCursor"`
	}
	_ = json.Unmarshal(result, &page)
	out := []byte(`{"tools":[`)
	n := 0
	for _, t := range page.Tools {
		if len(t.Name) == 0 || t.Name[0] != '"' || len(t.InputSchema) == 0 || t.InputSchema[0] != '{' {
			continue
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = append(out, `{"name":`...)
		out = append(out, t.Name...)
		out = append(out, `,"inputSchema":`...)
		out = append(out, t.InputSchema...)
		out = append(out, '}')
	}
	out = append(out, ']')
	if page.NextCursor != nil {
		c, _ := json.Marshal(*page.NextCursor)
		out = append(append(out, `,"nextCursor":`...), c...)
	}
	return append(out, '}')
}

// rareMarker is a text the bridge looks for in results of tens of
// megabytes. Each starts with '"', which JSON holds every few bytes, so
// bytes.Index, skipping from that byte, soon falls back to comparing at
// every position; index searches from anchor instead, where a byte results
// rarely hold ('/', '_', a capital) starts the tail, which is skipped to at
// memchr's speed, and checks the head before each match. (A 40 MB result
// searched three times cost the bridge 0.1 s of CPU.)
type rareMarker struct {
	pat    string
	anchor int // where pat's rare tail starts
}

// The markers searched for in every message, or every result.
var (
	markProgress      = rareMarker{`"notifications/progress"`, len(`"notifications`)}
	markInputRequired = rareMarker{`"input_required"`, len(`"input`)}
	markIsError       = rareMarker{`"isError"`, len(`"is`)}
)

// index returns the index of the first m.pat in s, or -1.
func (m rareMarker) index(s []byte) int {
	head, tail := m.pat[:m.anchor], m.pat[m.anchor:]
	for off := 0; ; {
		i := bytes.Index(s[off:], []byte(tail))
		if i < 0 {
			return -1
		}
		if at := off + i; at >= m.anchor && string(s[at-m.anchor:at]) == head {
			return at - m.anchor
		}
		off += i + 1
	}
}

// rawRef holds a JSON value as a sub-slice of the input being decoded
// (no copy): valid only while that input is.
type rawRef []byte

func (r *rawRef) UnmarshalJSON(b []byte) error {
	*r = b
	return nil
}

// rawIDKey normalizes a JSON id the way sdkIDKey does.
func rawIDKey(id []byte) string {
	if len(id) > 0 && id[0] == '"' {
		var s string
		if json.Unmarshal(id, &s) == nil {
			return "s:" + s
		}
		return "s:" + string(id)
	}
	if n, err := strconv.ParseInt(string(id), 10, 64); err == nil {
		return "n:" + strconv.FormatInt(n, 10)
	}
	var f float64
	if json.Unmarshal(id, &f) == nil && f == float64(int64(f)) {
		return "n:" + strconv.FormatInt(int64(f), 10)
	}
	return "x:" + string(id)
}

func sdkIDKey(id jsonrpc.ID) string {
	switch v := id.Raw().(type) {
	case int64:
		return "n:" + strconv.FormatInt(v, 10)
	case string:
		return "s:" + v
	}
	return "x:"
}

// peekProgressToken returns params._meta.progressToken as a string, reading
// only as far as _meta (go-sdk encodes _meta first, before the arguments,
// so a 64 MiB document argument is not scanned).
func peekProgressToken(params json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(params))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return ""
		}
		if key == "_meta" {
			var meta struct {
				ProgressToken any `json:"progressToken"`
			}
			if dec.Decode(&meta) != nil {
				return ""
			}
			s, _ := meta.ProgressToken.(string)
			return s
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return ""
}
