package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
// (the default since issue 13.2; the name is older), a server that speaks only that
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

// TestDiscoverBounded: offered 2026-07-28, a server of 2025-11-25 that
// leaves server/discover unanswered (as servers that ignore unknown
// methods do) is connected with 2025-11-25 after Options.DiscoverTimeout,
// not after InitTimeout, over stdio and over HTTP, and so is an HTTP server
// that refuses it (method not found; the bridge's re-probe for slow
// servers of 2026-07-28 only does not take either for one); and the next
// start of the same server definition offers 2025-11-25 at once, without
// server/discover.
func TestDiscoverBounded(t *testing.T) {
	replay, err := bridgetest.NewHTTPReplay(bridgetest.HTTPOptions{Name: "silent-http"})
	if err != nil {
		t.Fatal(err)
	}
	var discovers atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "server/discover" {
			discovers.Add(1)
			select { // never answers
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		replay.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	httpSpec := bridge.ServerSpec{Name: "silent-http", Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp", Source: "test", Fingerprint: "sha256:silent"}
	refusing, err := bridgetest.NewHTTPReplay(bridgetest.HTTPOptions{Name: "refusing-http"})
	if err != nil {
		t.Fatal(err)
	}
	refusingSrv := httptest.NewServer(refusing)
	t.Cleanup(refusingSrv.Close)
	refusingSpec := bridge.ServerSpec{Name: "refusing-http", Transport: bridge.TransportHTTP, URL: refusingSrv.URL + "/mcp", Source: "test", Fingerprint: "sha256:refusing"}
	j := journal(t)
	stdioSpec := fakeServer(t, "silent-stdio", bridgetest.Mode{Journal: j, IgnoreUnknown: true})
	ctx := testCtx(t, 60*time.Second)
	h := newHarness(t, bridge.Options{ProtocolVersion: "2026-07-28", DiscoverTimeout: 300 * time.Millisecond, InitTimeout: 30 * time.Second}, httpSpec, stdioSpec, refusingSpec)
	// Registered after the harness: runs before its leak check and before
	// srv.Close, which waits for handlers.
	t.Cleanup(func() { close(release) })
	p := h.page(ctx)
	for round := 1; round <= 2; round++ {
		for _, spec := range []bridge.ServerSpec{stdioSpec, httpSpec, refusingSpec} {
			start := time.Now()
			c := connect(t, ctx, p, spec.Name+strconv.Itoa(round), spec)
			if took := time.Since(start); c.Str("protocolVersion") != "2025-11-25" || took > 10*time.Second {
				t.Fatalf("round %d, %s: protocolVersion %q after %s", round, spec.Name, c.Str("protocolVersion"), took)
			}
			r, _ := p.Request(ctx, map[string]any{"type": "tools:call", "id": "c" + spec.Name + strconv.Itoa(round), "server": spec.Name, "tool": "echo", "arguments": map[string]any{}})
			mustOK(t, r)
			d, _ := p.Request(ctx, map[string]any{"type": "tools:disconnect", "id": "d" + spec.Name + strconv.Itoa(round), "server": spec.Name})
			mustOK(t, d)
		}
		waitFor(t, 10*time.Second, "the sessions to stop", func() bool {
			r, _ := p.Request(ctx, map[string]any{"type": "tools:servers", "id": "s"})
			return strings.Count(string(r.Fields["servers"]), `"state":"stopped"`) == 3
		})
	}
	entries, err := bridgetest.ReadJournal(j)
	if err != nil {
		t.Fatal(err)
	}
	methods := bridgetest.Methods(entries)
	count := func(m string) int {
		n := 0
		for _, x := range methods {
			if x == m {
				n++
			}
		}
		return n
	}
	if count("server/discover") != 1 || count("initialize") != 2 || methods[0] != "server/discover" || methods[1] != "initialize" {
		t.Fatalf("the stdio server received %s; want one server/discover (the first start only) and two initialize", methods)
	}
	if n := discovers.Load(); n != 1 {
		t.Fatalf("the HTTP server received %d server/discover; want 1 (the first start only)", n)
	}
	methods = refusing.Methods()
	if count("server/discover") != 1 || count("initialize") != 2 || methods[0] != "server/discover" || methods[1] != "initialize" {
		t.Fatalf("the refusing HTTP server received %v; want one server/discover (the first start only) and two initialize", methods)
	}
}

// TestParamHeaders: under 2026-07-28 a tool that declares x-mcp-header on
// an argument gets the Mcp-Param-* header on its call (go-sdk's server
// refuses the call without it), so the SDK must know the tool's real
// input schema although the bridge relays the listing raw.
func TestParamHeaders(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "headers", Version: "1.0.0"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2026-07-28"}})
	server.AddTool(&mcp.Tool{Name: "region", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"required":["region"]}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	var seen atomic.Value
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Mcp-Param-Region"); v != "" {
			seen.Store(v)
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	spec := bridge.ServerSpec{Name: "headers", Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp", Source: "test", Fingerprint: "sha256:headers"}
	ctx := testCtx(t, 30*time.Second)
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)
	c := connect(t, ctx, p, 1, spec)
	if c.Str("protocolVersion") != "2026-07-28" {
		t.Fatalf("connect: %s", c.Raw)
	}
	r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "tool": "region", "arguments": map[string]any{"region": "eu-west"}})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	if seen.Load() != "eu-west" {
		t.Fatalf("Mcp-Param-Region was %v", seen.Load())
	}
}

// TestInputRequired: a 2026-07-28 tool whose result asks the client for
// more input (a multi-round-trip result) is answered to the page as one
// line naming what the tool wanted, since the Builder cannot supply it.
func TestInputRequired(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1.0.0"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2026-07-28"}})
	server.AddTool(&mcp.Tool{Name: "box", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"size": &mcp.ElicitParams{Message: "Which box size?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"nm": map[string]any{"type": "number"}}}}}}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	spec := bridge.ServerSpec{Name: "asker", Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp", Source: "test", Fingerprint: "sha256:asker"}
	ctx := testCtx(t, 30*time.Second)
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "tool": "box", "arguments": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	mustErr(t, r, bridge.CodeServerFailed)
	if want := `asker: box asked for more input (elicitation/create "Which box size?"), which the Builder cannot supply in the middle of a call`; r.Error.Message != want {
		t.Fatalf("message %q, want %q", r.Error.Message, want)
	}
}

// TestInvalidHeaderDeclarationDropped: under 2026-07-28, a tool whose
// x-mcp-header declaration is invalid (on an object property) is left out
// of the listing and tools:connect names it with the reason; the other
// tools are listed as sent.
func TestInvalidHeaderDeclarationDropped(t *testing.T) {
	inner := modernServer(t, "2026-07-28")
	bad := `{"name":"bad","inputSchema":{"type":"object","properties":{"o":{"type":"object","x-mcp-header":"O"}}}},`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") != "tools/list" {
			inner.ServeHTTP(w, r)
			return
		}
		// go-sdk's server refuses to register such a tool: splice it into
		// the listing as a server of another SDK could send it.
		rec := httptest.NewRecorder()
		inner.ServeHTTP(rec, r)
		body := strings.Replace(rec.Body.String(), `"tools":[`, `"tools":[`+bad, 1)
		for k, v := range rec.Header() {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(rec.Code)
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	spec := bridge.ServerSpec{Name: "modern", Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp", Source: "test", Fingerprint: "sha256:modern"}
	ctx := testCtx(t, 30*time.Second)
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)
	c := connect(t, ctx, p, 1, spec)
	var tools []struct{ Name string }
	json.Unmarshal(c.Fields["tools"], &tools)
	var dropped []struct{ Name, Reason string }
	json.Unmarshal(c.Fields["droppedTools"], &dropped)
	if len(tools) != 1 || tools[0].Name != "hello" || len(dropped) != 1 || dropped[0].Name != "bad" ||
		!strings.Contains(dropped[0].Reason, "invalid x-mcp-header declaration") || !strings.Contains(dropped[0].Reason, `"o"`) {
		t.Fatalf("connect: tools %s, droppedTools %s", c.Fields["tools"], c.Fields["droppedTools"])
	}
}

// TestDiscoverSlowModernStart: a server of 2026-07-28 only that is slower
// than Options.DiscoverTimeout to answer server/discover the first time (a
// stdio server on its first uvx download; a Streamable HTTP server that
// starts cold, as a serverless or autoscaled lab service does) answers it
// after the bound and refuses the fallback initialize; the bridge does not
// lose it: it starts the server again and waits for server/discover as
// long as InitTimeout allows, the page gets the tools at 2026-07-28 and a
// call works. The next start of the same server definition waits for
// server/discover at once: no initialize reaches the server again.
func TestDiscoverSlowModernStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (bridge.ServerSpec, func() []string) // the server, and the methods it received so far
	}{
		{"stdio", slowModernStdio},
		{"http", slowModernHTTP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t) // first: its servers' cleanups run before it
			spec, received := tc.start(t)
			ctx := testCtx(t, 60*time.Second)
			h := newHarness(t, bridge.Options{DiscoverTimeout: 200 * time.Millisecond, InitTimeout: 30 * time.Second}, spec)
			p := h.page(ctx)
			for round := 1; round <= 2; round++ {
				id := strconv.Itoa(round)
				c := connect(t, ctx, p, "c"+id, spec)
				if c.Str("protocolVersion") != "2026-07-28" || !strings.Contains(string(c.Fields["tools"]), `"name":"hello"`) ||
					!strings.Contains(string(c.Fields["serverInfo"]), `"title":"Modern server"`) || string(c.Fields["instructions"]) != `"Say hello."` {
					t.Fatalf("round %d: connect: %s", round, c.Raw)
				}
				r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": "h" + id, "server": spec.Name, "tool": "hello", "arguments": map[string]any{"name": "lab"}})
				if err != nil {
					t.Fatal(err)
				}
				mustOK(t, r)
				d, _ := p.Request(ctx, map[string]any{"type": "tools:disconnect", "id": "d" + id, "server": spec.Name})
				mustOK(t, d)
				waitFor(t, 10*time.Second, "the session to stop", func() bool {
					r, _ := p.Request(ctx, map[string]any{"type": "tools:servers", "id": "s"})
					return strings.Contains(string(r.Fields["servers"]), `"state":"stopped"`)
				})
				methods := received()
				// Round 1: the first start sends server/discover (answered
				// late) and initialize (refused); the second is spoken to in
				// 2026-07-28. Round 2 adds one start that sends no
				// initialize. (The server handles requests concurrently: the
				// order received is not the order sent.)
				count := func(m string) (n int) {
					for _, x := range methods {
						if x == m {
							n++
						}
					}
					return n
				}
				if n := count("initialize"); n != 1 {
					t.Fatalf("round %d: the server received %v; want one initialize (refused, in the first start)", round, methods)
				}
				if n := count("server/discover"); n != round+1 {
					t.Fatalf("round %d: the server received %v; want %d server/discover", round, methods, round+1)
				}
			}
		})
	}
}

// slowModernStdio is the go-sdk stdio server of 2026-07-28 only that reads
// stdin 1.5 s after it started, as one that uvx first downloads does.
func slowModernStdio(t *testing.T) (bridge.ServerSpec, func() []string) {
	j := journal(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mode, _ := json.Marshal(bridge.ModernServerMode{StartDelayMs: 1500, Journal: j})
	spec := bridge.ServerSpec{Name: "slow-modern", Transport: bridge.TransportStdio, Command: exe, Args: []string{"-test.run=^$"},
		Env: map[string]string{bridge.ModernServerEnv: string(mode)}, Source: "test", Fingerprint: "sha256:slow-modern"}
	return spec, func() []string {
		var methods []string
		for _, line := range strings.Split(strings.TrimSpace(readFile(t, j)), "\n") {
			var e struct{ Method string }
			json.Unmarshal([]byte(line), &e)
			methods = append(methods, e.Method)
		}
		return methods
	}
}

// slowModernHTTP is the same go-sdk server of 2026-07-28 only over
// Streamable HTTP (stateless), starting cold: it answers its first
// server/discover only once the bridge has stopped waiting for it, that
// is once the fallback initialize has reached the server (or when the
// bridge gives the request up).
func slowModernHTTP(t *testing.T) (bridge.ServerSpec, func() []string) {
	var mu sync.Mutex
	var methods []string
	warm := make(chan struct{})
	var warmed sync.Once
	server := bridge.NewModernTestServer(nil)
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	var discovers atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct{ Method string }
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			json.Unmarshal(body, &m)
		}
		if m.Method != "" {
			mu.Lock()
			methods = append(methods, m.Method)
			mu.Unlock()
		}
		switch {
		case m.Method == "initialize":
			warmed.Do(func() { close(warm) })
		case m.Method == "server/discover" && discovers.Add(1) == 1:
			select {
			case <-warm:
			case <-r.Context().Done():
				return
			}
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	spec := bridge.ServerSpec{Name: "slow-modern", Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp", Source: "test", Fingerprint: "sha256:slow-modern"}
	return spec, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(methods)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDiscoverReprobes: a server definition known to speak 2026-07-28 is
// given no short bound on server/discover; when a start of it fails that
// way (here the server behind the same definition became one of
// 2025-11-25 that ignores server/discover), the page is told what
// happened, and the next start probes again with the bound and falls back;
// over stdio and over Streamable HTTP.
func TestDiscoverReprobes(t *testing.T) {
	for _, tc := range []struct {
		name string
		// servers returns the definition's modern and legacy forms (the
		// same name and fingerprint) and what makes the server legacy.
		servers func(t *testing.T) (modern, legacy bridge.ServerSpec, becomeLegacy func())
	}{
		{"stdio", changingStdio},
		{"http", changingHTTP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t) // first: its servers' cleanups run before it
			modern, legacy, becomeLegacy := tc.servers(t)
			var current atomic.Pointer[bridge.ServerSpec]
			current.Store(&modern)
			ctx := testCtx(t, 60*time.Second)
			h := newHarness(t, bridge.Options{DiscoverTimeout: 300 * time.Millisecond, InitTimeout: 5 * time.Second,
				Catalog: bridge.CatalogFunc(func(context.Context) bridge.Snapshot {
					return bridge.Snapshot{Servers: []bridge.ServerSpec{*current.Load()}}
				})})
			p := h.page(ctx)
			stopped := func() {
				waitFor(t, 10*time.Second, "the session to stop", func() bool {
					r, _ := p.Request(ctx, map[string]any{"type": "tools:servers", "id": "s"})
					return !strings.Contains(string(r.Fields["servers"]), `"state":"connected"`) &&
						!strings.Contains(string(r.Fields["servers"]), `"state":"starting"`)
				})
			}
			c := connect(t, ctx, p, 1, modern)
			if c.Str("protocolVersion") != "2026-07-28" {
				t.Fatalf("connect: %s", c.Raw)
			}
			d, _ := p.Request(ctx, map[string]any{"type": "tools:disconnect", "id": 2, "server": modern.Name})
			mustOK(t, d)
			stopped()

			current.Store(&legacy)
			becomeLegacy()
			r, err := p.Request(ctx, map[string]any{"type": "tools:connect", "id": 3, "server": modern.Name, "fingerprint": modern.Fingerprint, "confirmed": true})
			if err != nil {
				t.Fatal(err)
			}
			mustErr(t, r, bridge.CodeServerFailed)
			if !strings.Contains(r.Error.Message, "did not answer server/discover") || !strings.Contains(r.Error.Message, "probes for an older revision again") {
				t.Fatalf("message: %q", r.Error.Message)
			}
			stopped()

			c = connect(t, ctx, p, 4, legacy)
			if c.Str("protocolVersion") != "2025-11-25" {
				t.Fatalf("connect after the failed start: %s", c.Raw)
			}
		})
	}
}

// changingStdio: the definition runs go-sdk's stdio server of 2026-07-28
// only, then a bridgetest server of 2025-11-25 that ignores unknown
// methods (say an unpinned uvx package).
func changingStdio(t *testing.T) (modern, legacy bridge.ServerSpec, becomeLegacy func()) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mode, _ := json.Marshal(bridge.ModernServerMode{})
	modern = bridge.ServerSpec{Name: "changing", Transport: bridge.TransportStdio, Command: exe, Args: []string{"-test.run=^$"},
		Env: map[string]string{bridge.ModernServerEnv: string(mode)}, Source: "test", Fingerprint: "sha256:changing"}
	legacy = fakeServer(t, "changing", bridgetest.Mode{IgnoreUnknown: true})
	legacy.Fingerprint = modern.Fingerprint
	return modern, legacy, func() {}
}

// changingHTTP: the definition's URL is served by go-sdk's server of
// 2026-07-28 only, then by a server of 2025-11-25 that leaves
// server/discover unanswered (say a lab service redeployed from an older
// release).
func changingHTTP(t *testing.T) (modern, legacy bridge.ServerSpec, becomeLegacy func()) {
	replay, err := bridgetest.NewHTTPReplay(bridgetest.HTTPOptions{Name: "changing"})
	if err != nil {
		t.Fatal(err)
	}
	modernHandler := modernServer(t, "2026-07-28")
	var old atomic.Bool
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !old.Load():
			modernHandler.ServeHTTP(w, r)
		case r.Header.Get("Mcp-Method") == "server/discover":
			select { // never answers
			case <-r.Context().Done():
			case <-release:
			}
		default:
			replay.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before srv.Close, which waits for handlers
	modern = bridge.ServerSpec{Name: "changing", Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp", Source: "test", Fingerprint: "sha256:changing"}
	return modern, modern, func() { old.Store(true) }
}
