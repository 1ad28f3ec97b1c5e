package bridge_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHostileCorpus sends every frame of testdata/hostile-frames.txt on one
// connected tab and checks each is answered with its documented code (a
// one-line message), that the socket stays usable, and, from the server's
// journal, that nothing but initialize, tools/list, tools/call of listed
// tools and notifications ever reached the tool server: raw JSON-RPC in any
// field of a page message is data, never a method.
func TestHostileCorpus(t *testing.T) {
	leakCheck(t)
	ctx := testCtx(t, 60*time.Second)
	j := journal(t)
	spec := fakeServer(t, "fake", bridgetest.Mode{Journal: j})
	h := newHarness(t, bridge.Options{InboundLimit: 1 << 20}, spec)
	p := h.page(ctx)
	connect(t, ctx, p, "connect", spec)

	data, err := os.ReadFile("testdata/hostile-frames.txt")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{"-": true}
	for _, c := range bridge.ErrorCodes {
		documented[c] = true
	}
	calls := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		code, frame, ok := strings.Cut(line, "\t")
		if !ok || !documented[code] {
			t.Fatalf("corpus line %q: want <code>\\t<frame> with a documented code", line)
		}
		n++
		if code == "-" && strings.Contains(frame, `"tools:call"`) {
			calls++
		}
		if err := p.SendFrame([]byte(frame)); err != nil {
			t.Fatalf("%s: %v", frame, err)
		}
		m, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.OK != nil })
		if err != nil {
			t.Fatalf("%s: no answer: %v", frame, err)
		}
		if code == "-" {
			if !*m.OK {
				t.Errorf("%s: want ok, got %s", frame, m)
			}
			continue
		}
		if *m.OK || m.Error == nil || m.Error.Code != code {
			t.Errorf("%s: want %s, got %s", frame, code, m)
			continue
		}
		if m.Error.Message == "" || strings.ContainsAny(m.Error.Message, "\r\n") {
			t.Errorf("%s: the message must be one line: %q", frame, m.Error.Message)
		}
	}
	t.Logf("%d hostile frames answered", n)
	r, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": "still-there"})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)

	entries, err := bridgetest.ReadJournal(j)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, e := range entries {
		switch e.Method {
		case "", "server/discover", "initialize", "notifications/initialized", "tools/list", "notifications/cancelled":
		case "tools/call":
			got++
			if e.Tool != "echo" {
				t.Errorf("the server was asked to call %q", e.Tool)
			}
		default:
			t.Errorf("the server received %q", e.Method)
		}
		// server/discover (revision 2026-07-28) is the one unknown method
		// allowed: this 2025-11-25 server refuses it, and the bridge falls
		// back to initialize.
		if e.Unknown && e.Method != "server/discover" || e.ParseError {
			t.Errorf("the server received a message it could not handle: %+v", e)
		}
	}
	if got != calls {
		t.Errorf("the server received %d tools/call, the corpus makes %d", got, calls)
	}
}

// spoofingServer is go-sdk's Streamable HTTP server with one tool, "spoof"
// {token}: one notifications/progress carrying the given token (message
// "spoofed"), then one carrying the call's own token (message "own"), then
// the result. Both go out on the same stream, in that order.
func spoofingServer() http.Handler {
	server := mcp.NewServer(&mcp.Implementation{Name: "spoofer", Version: "1.0.0"}, nil)
	server.AddTool(&mcp.Tool{Name: "spoof", InputSchema: json.RawMessage(`{"type":"object","properties":{"token":{"type":"string"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Token string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: args.Token, Progress: 1, Message: "spoofed"})
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1, Message: "own"})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sent"}}}, nil
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
}

// TestProgressStaysWithItsServer: a server that sends progress with the
// token of another server's call (guessed, or learned: any token will do)
// reaches nobody. A progress token is looked up only among the calls of the
// session that received it, so the other server's page sees only its own
// server's progress, and the sender's page only its own call's.
func TestProgressStaysWithItsServer(t *testing.T) {
	leakCheck(t)
	ctx := testCtx(t, 60*time.Second)
	j := journal(t)
	victim := fakeServer(t, "victim", bridgetest.Mode{Journal: j})
	srv := httptest.NewServer(spoofingServer())
	tr := &http.Transport{}
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); tr.CloseIdleConnections() })
	spoofer := bridge.ServerSpec{Name: "spoofer", Transport: bridge.TransportHTTP, URL: srv.URL, Source: "test", Fingerprint: "sha256:spoofer"}
	h := newHarness(t, bridge.Options{HTTPTransport: tr}, victim, spoofer)
	pv, ps := h.page(ctx), h.page(ctx)
	connect(t, ctx, pv, "c", victim)
	connect(t, ctx, ps, "c", spoofer)

	// The victim's call is in flight (its own progress flows) while the
	// spoofer sends progress with its token, read from the victim's journal.
	if err := pv.Send(map[string]any{"type": "tools:call", "id": 1, "server": "victim", "tool": "slow",
		"arguments": map[string]any{"steps": 1000, "intervalMs": 100, "tag": "victim"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pv.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" && string(m.ID) == "1" }); err != nil {
		t.Fatal(err)
	}
	entries, err := bridgetest.ReadJournal(j)
	if err != nil {
		t.Fatal(err)
	}
	var token json.RawMessage
	for _, e := range entries {
		if e.Method == "tools/call" {
			token = e.ProgressToken
		}
	}
	if token == nil {
		t.Fatal("the victim's tools/call carried no progress token")
	}
	r, err := ps.Request(ctx, map[string]any{"type": "tools:call", "id": 1, "server": "spoofer", "tool": "spoof",
		"arguments": map[string]any{"token": token}})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	// The spoofer's own progress reaches its page: the one before it, on the
	// same stream, has been routed (or dropped) by then.
	if _, err := ps.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" && m.Str("message") == "own" }); err != nil {
		t.Fatalf("the spoofer's own progress: %v", err)
	}
	// Whatever was queued for the victim's page before this reply has
	// arrived with it.
	r, err = pv.Request(ctx, map[string]any{"type": "tools:servers", "id": "after"})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	for name, p := range map[string]*bridgetest.Page{"victim": pv, "spoofer": ps} {
		for _, m := range p.All() {
			if m.Type == "tools:progress" && m.Str("message") == "spoofed" {
				t.Errorf("the %s's page got progress the spoofer sent with the victim's token %s: %s", name, token, m)
			}
		}
	}
	r, err = pv.Request(ctx, map[string]any{"type": "tools:cancel", "id": 1})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	r, err = pv.Reply(ctx, "tools:call", 1)
	if err != nil {
		t.Fatal(err)
	}
	mustErr(t, r, bridge.CodeCancelled)
}
