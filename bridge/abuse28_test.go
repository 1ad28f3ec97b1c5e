package bridge_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// deepServer is a Streamable HTTP server written by hand (go-sdk's own
// cannot send what its decoder cannot read), answering with JSON bodies:
// one tool, "deep", whose result nests arrays depth times, more than a JSON
// decoder reads.
func deepServer(depth int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&m) != nil {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		if m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var body string
		switch m.Method {
		case "initialize":
			body = `"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"deep","version":"1"}}`
		case "tools/list":
			body = `"result":{"tools":[{"name":"deep","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			body = `"result":{"content":[],"nesting":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
		default:
			body = `"error":{"code":-32601,"message":"method not found"}`
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,` + body + `}`))
	})
}

// TestUnparseableResultFailsAtOnce: a response too deep for the JSON
// decoder (20,000 nested arrays) whose id can be read fails its call or
// connect at once, saying why, over stdio and Streamable HTTP alike; it
// used to be dropped as junk, leaving the call to its timeout and the
// connect to InitTimeout (10 minutes by default). A listing over the
// result limit fails its connect at once too. Bound: each answered
// server-failed or too-large within 10 s (the call's timeout is 60 s, the
// start's 60 s here).
func TestUnparseableResultFailsAtOnce(t *testing.T) {
	leakCheck(t) // before the HTTP server, whose cleanup must run first
	const depth = 20000
	calls := fakeServer(t, "deepcall", bridgetest.Mode{})
	deepList := fakeServer(t, "deeplist", bridgetest.Mode{ListPadDepth: depth})
	bigList := fakeServer(t, "biglist", bridgetest.Mode{ListPadBytes: 2 << 20})
	srv := httptest.NewServer(deepServer(depth))
	tr := &http.Transport{}
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); tr.CloseIdleConnections() })
	httpDeep := bridge.ServerSpec{Name: "deephttp", Transport: bridge.TransportHTTP, URL: srv.URL, Source: "test", Fingerprint: "sha256:deephttp"}
	h := newHarness(t, bridge.Options{InitTimeout: time.Minute, ResultLimit: 1 << 20, HTTPTransport: tr}, calls, deepList, bigList, httpDeep)
	ctx := testCtx(t, 3*time.Minute)
	p := h.page(ctx)
	connect(t, ctx, p, "c1", calls)
	connect(t, ctx, p, "c2", httpDeep)
	const bound = 10 * time.Second
	var slowest time.Duration
	for _, tc := range []struct {
		name string
		req  map[string]any
		code string
		has  string
	}{
		{"stdio call", map[string]any{"type": "tools:call", "server": "deepcall", "tool": "big",
			"arguments": map[string]any{"bytes": 0, "depth": depth}, "timeoutMs": 60000}, bridge.CodeServerFailed, "deepcall: big failed: its response of"},
		{"http call", map[string]any{"type": "tools:call", "server": "deephttp", "tool": "deep", "timeoutMs": 60000},
			bridge.CodeServerFailed, "deephttp: deep failed: its response of"},
		{"stdio listing too deep", map[string]any{"type": "tools:connect", "server": "deeplist",
			"fingerprint": deepList.Fingerprint, "confirmed": true}, bridge.CodeServerFailed, "deeplist: tools/list failed: its response of"},
		{"stdio listing too large", map[string]any{"type": "tools:connect", "server": "biglist",
			"fingerprint": bigList.Fingerprint, "confirmed": true}, bridge.CodeServerFailed, "exceeds the limit of 1048576 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req["id"] = tc.name
			start := time.Now()
			r, err := p.Request(ctx, tc.req)
			took := time.Since(start)
			slowest = max(slowest, took)
			if err != nil {
				t.Fatal(err)
			}
			mustErr(t, r, tc.code)
			if !strings.Contains(r.Error.Message, tc.has) || !strings.Contains(r.Error.Message, "could not be read") && tc.code == bridge.CodeServerFailed && !strings.Contains(tc.has, "limit") {
				t.Errorf("the message does not say why: %q", r.Error.Message)
			}
			if took > bound {
				t.Errorf("answered after %s; the bound is %s", took, bound)
			}
		})
	}
	t.Logf("abuse: a result or listing too deep (%d nested arrays) or too large to parse, stdio and HTTP | its call or connect fails at once, naming why, within %s | slowest answer %s", depth, bound, slowest.Round(time.Millisecond))
}
