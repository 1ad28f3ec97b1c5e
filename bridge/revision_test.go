package bridge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// modernServer is go-sdk's stateless Streamable HTTP server speaking only
// the revisions given (go-sdk's stateful handler cannot serve 2026-07-28),
// with one tool "hello" answering "hello <name>".
func modernServer(t *testing.T, versions ...string) http.Handler {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "modern", Title: "Modern server", Version: "2.0.0"},
		&mcp.ServerOptions{SupportedProtocolVersions: versions, Instructions: "Say hello."})
	server.AddTool(&mcp.Tool{Name: "hello", InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Name string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + args.Name}}}, nil
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
}

// TestRevision20260728OptIn: with Options.ProtocolVersion "2026-07-28"
// (not the default yet: see issue 13.2), a server that speaks only that
// revision is connected through server/discover, its self-description
// (serverInfo from discover's _meta, instructions) reaches the page, and a
// call works; a server of 2025-11-25 is still connected, by go-sdk's
// fallback to initialize after server/discover is refused, and its
// serverInfo still reaches the page.
func TestRevision20260728OptIn(t *testing.T) {
	srv := httptest.NewServer(modernServer(t, "2026-07-28"))
	t.Cleanup(srv.Close)
	modern := bridge.ServerSpec{Name: "modern", Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp", Source: "test", Fingerprint: "sha256:modern"}
	j := journal(t)
	legacy := fakeServer(t, "legacy", bridgetest.Mode{Journal: j})
	ctx := testCtx(t, 30*time.Second)
	h := newHarness(t, bridge.Options{ProtocolVersion: "2026-07-28", InitTimeout: 10 * time.Second}, modern, legacy)
	p := h.page(ctx)

	c := connect(t, ctx, p, 1, modern)
	var info struct{ Name, Title string }
	json.Unmarshal(c.Fields["serverInfo"], &info)
	if c.Str("protocolVersion") != "2026-07-28" || info.Name != "modern" || info.Title != "Modern server" || string(c.Fields["instructions"]) != `"Say hello."` {
		t.Fatalf("connect to a 2026-07-28 server: %s", c.Raw)
	}
	r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": modern.Name, "tool": "hello", "arguments": map[string]any{"name": "lab"}})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	if !strings.Contains(string(r.Fields["result"]), `"hello lab"`) {
		t.Fatalf("call: %s", r.Raw)
	}

	c = connect(t, ctx, p, 3, legacy)
	if c.Str("protocolVersion") != "2025-11-25" || string(c.Fields["serverInfo"]) != `{"name":"legacy","version":"1.0.0"}` {
		t.Fatalf("connect to a 2025-11-25 server: %s", c.Raw)
	}
	entries, err := bridgetest.ReadJournal(j)
	if err != nil {
		t.Fatal(err)
	}
	methods := bridgetest.Methods(entries)
	if len(methods) < 2 || methods[0] != "server/discover" || methods[1] != "initialize" || slices.Index(methods, "server/discover") != 0 {
		t.Fatalf("a 2025-11-25 server received %v; want server/discover (refused), then initialize", methods)
	}
}
