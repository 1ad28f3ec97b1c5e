package bridgetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// HTTPOptions configures NewHTTPReplay. The zero value serves the built-in
// echo and slow tools.
type HTTPOptions struct {
	// Name and Version are serverInfo. If empty, "bridgetest-http" and Version.
	Name    string
	Version string
	// ServerInfo, when set, is initialize's serverInfo exactly as these
	// bytes (indentation kept) in place of {"name", "version"}; Instructions,
	// when set, is initialize's instructions.
	ServerInfo   json.RawMessage
	Instructions string
	// FixtureList is a tools-list fixture file; when set, the tools/list
	// result is the file's bytes exactly (surrounding whitespace trimmed,
	// indentation kept) instead of the built-in listing. No pagination.
	FixtureList string
	// FixtureCalls maps a tool name to a call fixture file; the call's result
	// is the file's "result" value, byte for byte as in the file.
	FixtureCalls map[string]string

	// The fields below make the server behave like a release of another
	// SDK (see PythonMCP1 and PythonMCP2 for the official Python SDK's).
	// Their zero values are the replay server described on HTTPReplay.

	// Stateless issues no Mcp-Session-Id and requires none: every request
	// stands alone. Modern implies it.
	Stateless bool
	// Modern speaks revision 2026-07-28 only: server/discover is answered
	// with a result naming only that revision (capabilities: tools, no
	// listChanged), initialize is refused with -32022 and data.supported.
	Modern bool
	// DiscoverCode is the JSON-RPC error code answering server/discover
	// when not Modern. If zero, -32601 (method not found).
	DiscoverCode int
	// RefuseNotifications answers every POSTed notification (and response)
	// with 400 Bad Request, as mcp 2.0.0 does. If false, 202.
	RefuseNotifications bool
	// CompleteResults gives every result resultType "complete" and
	// _meta["io.modelcontextprotocol/serverInfo"], as mcp 2.0.0's carry.
	CompleteResults bool
	// EmptyVersion makes serverInfo.version "" (mcp 2.x's default) instead
	// of Version.
	EmptyVersion bool
}

// PythonMCP1 is how the official Python SDK's mcp 1.29.0 (the newest
// 1.x) behaves over Streamable HTTP: revisions up to 2025-11-25, -32602
// for server/discover; stateful unless stateless is true.
func PythonMCP1(stateless bool) HTTPOptions {
	return HTTPOptions{Name: "python-mcp-1.29.0", Version: "1.29.0", DiscoverCode: -32602, Stateless: stateless}
}

// PythonMCP2 is how mcp 2.0.0 (the newest 2.x release) behaves over
// Streamable HTTP: revision 2026-07-28 only (always stateless), 400 for
// every POSTed notification, an empty serverInfo.version, and results
// carrying resultType "complete" and the serverInfo in _meta.
func PythonMCP2() HTTPOptions {
	return HTTPOptions{Name: "python-mcp-2.0.0", Modern: true, Stateless: true, RefuseNotifications: true,
		CompleteResults: true, EmptyVersion: true}
}

// RecordedRequest is one HTTP request the replay server received.
type RecordedRequest struct {
	HTTPMethod string      // POST, GET, DELETE, ...
	RPCMethod  string      // the JSON-RPC method, empty for responses and non-POST requests
	SessionID  string      // the Mcp-Session-Id header as sent
	Header     http.Header // a copy of every request header
	Status     int         // the HTTP status answered
}

// HTTPReplay is a minimal Streamable HTTP MCP server (an http.Handler) that
// replays fixtures without re-encoding them:
//
//   - POST of one JSON-RPC message. initialize issues an Mcp-Session-Id;
//     every other request must carry a known one (400 without, 404 when
//     unknown, as after Restart). Notifications and responses get 202.
//     Requests are answered with application/json, except a call of "slow"
//     with a progressToken from a client that accepts text/event-stream,
//     which is answered as SSE: one progress event per step, then the result.
//   - GET answers 405 (no standalone SSE stream); DELETE ends the session.
//   - Methods other than initialize, ping, tools/list, tools/call and
//     notifications are answered with JSON-RPC error -32601 and recorded.
//
// Built-in tools when FixtureList is empty: echo and slow (as in Serve).
type HTTPReplay struct {
	opts       HTTPOptions // read-only after NewHTTPReplay
	listBody   []byte      // the tools/list result; read-only
	callBodies map[string][]byte

	mu        sync.Mutex                   // guards everything below
	sessions  map[string]map[string]func() // session id to the cancel funcs of its calls in flight, by request id bytes ("" for a stateless server)
	requests  []RecordedRequest
	cancelled int // calls of slow that stopped because they were cancelled
}

const builtinHTTPList = `{"tools":[` +
	`{"name":"echo","description":"Return the arguments exactly as received.","inputSchema":{"type":"object"}},` +
	`{"name":"slow","description":"Send one progress notification per step, then answer.","inputSchema":{"type":"object","properties":{"steps":{"type":"integer"},"intervalMs":{"type":"integer"},"tag":{"type":"string"}}}}]}`

// NewHTTPReplay reads the fixtures and returns the handler.
func NewHTTPReplay(opts HTTPOptions) (*HTTPReplay, error) {
	if opts.Name == "" {
		opts.Name = "bridgetest-http"
	}
	if opts.Version == "" && !opts.EmptyVersion {
		opts.Version = Version
	}
	if opts.EmptyVersion {
		opts.Version = ""
	}
	if opts.Modern {
		opts.Stateless = true
	}
	h := &HTTPReplay{opts: opts, listBody: []byte(builtinHTTPList), callBodies: map[string][]byte{}, sessions: map[string]map[string]func(){}}
	if opts.FixtureList != "" {
		data, err := os.ReadFile(opts.FixtureList)
		if err != nil {
			return nil, fmt.Errorf("fixture list: %w", err)
		}
		data = bytes.TrimSpace(data)
		if !json.Valid(data) {
			return nil, fmt.Errorf("fixture list %s: not JSON", opts.FixtureList)
		}
		h.listBody = data
	}
	for name, path := range opts.FixtureCalls {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("call fixture: %w", err)
		}
		var doc struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(data, &doc); err != nil || len(doc.Result) == 0 {
			return nil, fmt.Errorf("call fixture %s: no result (%v)", path, err)
		}
		h.callBodies[name] = doc.Result // json.RawMessage keeps the file's bytes
	}
	return h, nil
}

// Restart forgets every session, as a server restart would: later requests
// with an old session id get 404.
func (h *HTTPReplay) Restart() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, calls := range h.sessions {
		for _, cancel := range calls {
			cancel()
		}
	}
	h.sessions = map[string]map[string]func(){}
}

// Cancelled is the number of calls of slow that stopped because they were
// cancelled (notifications/cancelled, or their response stream closed).
func (h *HTTPReplay) Cancelled() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cancelled
}

// Requests returns a copy of every request received so far.
func (h *HTTPReplay) Requests() []RecordedRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]RecordedRequest, len(h.requests))
	copy(out, h.requests)
	return out
}

// Methods returns the JSON-RPC methods received so far, in order.
func (h *HTTPReplay) Methods() []string {
	var out []string
	for _, r := range h.Requests() {
		if r.RPCMethod != "" {
			out = append(out, r.RPCMethod)
		}
	}
	return out
}

func (h *HTTPReplay) record(r *http.Request, rpcMethod string, status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests = append(h.requests, RecordedRequest{
		HTTPMethod: r.Method, RPCMethod: rpcMethod, SessionID: r.Header.Get("Mcp-Session-Id"),
		Header: r.Header.Clone(), Status: status,
	})
}

// maxHTTPBody bounds a request body.
const maxHTTPBody = 64 << 20

// ServeHTTP implements http.Handler.
func (h *HTTPReplay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get("Mcp-Session-Id")
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		h.mu.Lock()
		calls, ok := h.sessions[sid]
		delete(h.sessions, sid)
		h.mu.Unlock()
		status := http.StatusNoContent
		if !ok {
			status = http.StatusNotFound
		}
		for _, cancel := range calls {
			cancel()
		}
		h.record(r, "", status)
		w.WriteHeader(status)
		return
	default:
		h.record(r, "", http.StatusMethodNotAllowed)
		w.Header().Set("Allow", "POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxHTTPBody+1))
	if err != nil || len(body) > maxHTTPBody {
		h.record(r, "", http.StatusRequestEntityTooLarge)
		http.Error(w, "body unreadable or too large", http.StatusRequestEntityTooLarge)
		return
	}
	var m incoming
	if err := json.Unmarshal(body, &m); err != nil {
		h.record(r, "", http.StatusBadRequest)
		http.Error(w, "not one JSON-RPC message", http.StatusBadRequest)
		return
	}
	if h.opts.Stateless {
		sid = ""
		h.mu.Lock()
		if h.sessions[""] == nil {
			h.sessions[""] = map[string]func(){}
		}
		h.mu.Unlock()
	}
	if m.Method == "initialize" && h.opts.Modern {
		h.record(r, m.Method, http.StatusOK)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"]}}}`+"\n", m.ID)
		return
	}
	if m.Method == "initialize" {
		if !m.hasID() {
			h.record(r, m.Method, http.StatusBadRequest)
			http.Error(w, "initialize needs an id", http.StatusBadRequest)
			return
		}
		h.initialize(w, r, &m)
		return
	}
	if m.Method == "server/discover" && m.hasID() {
		h.record(r, m.Method, http.StatusOK)
		if !h.opts.Modern {
			code := h.opts.DiscoverCode
			if code == 0 {
				code = -32601
			}
			writeJSONError(w, m.ID, code, "method not found: server/discover")
			return
		}
		info, _ := json.Marshal(map[string]any{"name": h.opts.Name, "version": h.opts.Version})
		writeJSONReply(w, m.ID, []byte(`{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":`+string(info)+`}}`))
		return
	}
	if sid == "" && !h.opts.Stateless {
		h.record(r, m.Method, http.StatusBadRequest)
		http.Error(w, "missing Mcp-Session-Id", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	_, known := h.sessions[sid]
	h.mu.Unlock()
	if !known {
		h.record(r, m.Method, http.StatusNotFound)
		http.Error(w, "unknown session", http.StatusNotFound)
		return
	}
	if !m.hasID() && h.opts.RefuseNotifications {
		h.record(r, m.Method, http.StatusBadRequest)
		http.Error(w, "Bad Request: notifications are not accepted", http.StatusBadRequest)
		return
	}
	if !m.hasID() { // a notification or a response
		h.record(r, m.Method, http.StatusAccepted)
		if m.Method == "notifications/cancelled" {
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			json.Unmarshal(m.Params, &p)
			h.mu.Lock()
			cancel := h.sessions[sid][string(p.RequestID)]
			h.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	h.record(r, m.Method, http.StatusOK)
	switch m.Method {
	case "ping":
		writeJSONReply(w, m.ID, h.complete([]byte(`{}`)))
	case "tools/list":
		writeJSONReply(w, m.ID, h.complete(h.listBody))
	case "tools/call":
		h.call(w, r, sid, &m)
	default:
		writeJSONError(w, m.ID, -32601, "method not found: "+m.Method)
	}
}

func (h *HTTPReplay) initialize(w http.ResponseWriter, r *http.Request, m *incoming) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	json.Unmarshal(m.Params, &p)
	version := protocolVersions[0]
	for _, v := range protocolVersions {
		if v == p.ProtocolVersion {
			version = v
		}
	}
	var idb [16]byte
	rand.Read(idb[:])
	sid := hex.EncodeToString(idb[:])
	h.mu.Lock()
	h.sessions[sid] = map[string]func(){}
	h.mu.Unlock()
	h.record(r, m.Method, http.StatusOK)
	res, _ := json.Marshal(map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{"tools": map[string]any{}},
		"serverInfo":      map[string]any{"name": h.opts.Name, "version": h.opts.Version},
	})
	if h.opts.ServerInfo != nil || h.opts.Instructions != "" {
		// Written by hand so that serverInfo keeps its bytes.
		pv, _ := json.Marshal(version)
		var b bytes.Buffer
		b.WriteString(`{"protocolVersion":`)
		b.Write(pv)
		b.WriteString(`,"capabilities":{"tools":{}},"serverInfo":`)
		if h.opts.ServerInfo != nil {
			b.Write(h.opts.ServerInfo)
		} else {
			si, _ := json.Marshal(map[string]any{"name": h.opts.Name, "version": h.opts.Version})
			b.Write(si)
		}
		if h.opts.Instructions != "" {
			in, _ := json.Marshal(h.opts.Instructions)
			b.WriteString(`,"instructions":`)
			b.Write(in)
		}
		b.WriteString(`}`)
		res = b.Bytes()
	}
	w.Header().Set("Mcp-Session-Id", sid)
	writeJSONReply(w, m.ID, res)
}

func (h *HTTPReplay) call(w http.ResponseWriter, r *http.Request, sid string, m *incoming) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		writeJSONError(w, m.ID, -32602, "invalid tools/call params")
		return
	}
	if body, ok := h.callBodies[p.Name]; ok {
		writeJSONReply(w, m.ID, h.complete(body))
		return
	}
	switch {
	case p.Name == "echo" && h.opts.FixtureList == "":
		args := p.Arguments
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		var b bytes.Buffer
		b.WriteString(`{"content":[{"type":"text","text":"echo"}],"structuredContent":{"echo":`)
		b.Write(args)
		b.WriteString(`}}`)
		writeJSONReply(w, m.ID, h.complete(b.Bytes()))
	case p.Name == "slow" && h.opts.FixtureList == "":
		h.slow(w, r, sid, m.ID, p.Arguments, p.Meta.ProgressToken)
	default:
		writeJSONError(w, m.ID, -32602, "unknown tool: "+p.Name)
	}
}

func (h *HTTPReplay) slow(w http.ResponseWriter, r *http.Request, sid string, id, args, token json.RawMessage) {
	a := struct {
		Steps      int    `json:"steps"`
		IntervalMs int    `json:"intervalMs"`
		Tag        string `json:"tag"`
	}{Steps: 5, IntervalMs: 100}
	if len(args) > 0 {
		if err := json.Unmarshal(args, &a); err != nil {
			writeJSONError(w, id, -32602, "invalid arguments for slow")
			return
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	h.mu.Lock()
	if calls, ok := h.sessions[sid]; ok {
		calls[string(id)] = cancel
	}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.sessions[sid], string(id))
		h.mu.Unlock()
	}()
	flusher, canFlush := w.(http.Flusher)
	sse := token != nil && canFlush && acceptsSSE(r)
	if sse {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		flusher.Flush()
	}
	for i := 1; i <= a.Steps; i++ {
		t := time.NewTimer(time.Duration(a.IntervalMs) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			h.mu.Lock()
			h.cancelled++
			h.mu.Unlock()
			if !sse {
				// The call was cancelled: answer nothing useful, as a
				// server that dropped it would.
				w.WriteHeader(http.StatusAccepted)
			}
			return
		case <-t.C:
		}
		if sse {
			msg, _ := json.Marshal(fmt.Sprintf("%s step %d", a.Tag, i))
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":%s,\"progress\":%d,\"total\":%d,\"message\":%s}}\n\n", token, i, a.Steps, msg)
			flusher.Flush()
		}
	}
	tag, _ := json.Marshal(a.Tag)
	result := string(h.complete([]byte(fmt.Sprintf(`{"content":[{"type":"text","text":"slow done"}],"structuredContent":{"tag":%s,"steps":%d}}`, tag, a.Steps))))
	if sse {
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n\n", id, result)
		flusher.Flush()
		return
	}
	writeJSONReply(w, id, []byte(result))
}

// complete returns result with resultType "complete" and the serverInfo in
// _meta when HTTPOptions.CompleteResults is set (a result that has _meta
// already keeps it, without the serverInfo), else result as it is.
func (h *HTTPReplay) complete(result []byte) []byte {
	return completeResult(h.opts.CompleteResults, h.opts.Name, h.opts.Version, result)
}

func completeResult(on bool, name, version string, result []byte) []byte {
	result = bytes.TrimSpace(result)
	if !on || len(result) < 2 || result[0] != '{' {
		return result
	}
	head := `"resultType":"complete"`
	if !bytes.Contains(result, []byte(`"_meta"`)) {
		info, _ := json.Marshal(map[string]string{"name": name, "version": version})
		head += `,"_meta":{"io.modelcontextprotocol/serverInfo":` + string(info) + `}`
	}
	out := make([]byte, 0, len(result)+len(head)+1)
	out = append(out, '{')
	out = append(out, head...)
	if rest := bytes.TrimSpace(result[1:]); len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, result[1:]...)
}

func acceptsSSE(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
			return true
		}
	}
	return false
}

// writeJSONReply answers with result embedded byte for byte.
func writeJSONReply(w http.ResponseWriter, id, result []byte) {
	w.Header().Set("Content-Type", "application/json")
	var b bytes.Buffer
	b.Grow(len(result) + 64)
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(id)
	b.WriteString(`,"result":`)
	b.Write(result)
	b.WriteString("}\n")
	w.Write(b.Bytes())
}

func writeJSONError(w http.ResponseWriter, id []byte, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	mb, _ := json.Marshal(msg)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`+"\n", id, code, mb)
}
