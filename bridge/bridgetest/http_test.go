package bridgetest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// headerTransport adds headers to every request, as a bridge with configured
// headers would.
type headerTransport struct {
	base http.RoundTripper
	add  http.Header
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.add {
		r.Header[k] = v
	}
	return h.base.RoundTrip(r)
}

func connectHTTP(t *testing.T, url string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr := &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: headerTransport{http.DefaultTransport, http.Header{"X-Bridge-Test": {"1"}}}}}
	cs, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return cs
}

func TestHTTPReplayFixtures(t *testing.T) {
	list := fixture(t, "tools-list.json")
	callFile := fixture(t, "call-polymer_chain.json")
	h, err := NewHTTPReplay(HTTPOptions{Name: "megane-builder-tools", FixtureList: list, FixtureCalls: map[string]string{"polymer_chain": callFile}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer srv.CloseClientConnections()

	cs := connectHTTP(t, srv.URL, nil)
	names := toolNames(t, cs)
	if want := []string{"liquid_box", "polymer_chain", "solvate"}; !reflect.DeepEqual(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "polymer_chain", Arguments: map[string]any{"seed": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if txt := res.Content[0].(*mcp.TextContent).Text; txt != "Polymer chain: 10 units of ethylene (62 atoms)." {
		t.Errorf("text %q", txt)
	}
	sid := ""
	for _, r := range h.Requests() {
		if r.RPCMethod == "tools/call" {
			sid = r.SessionID
			if r.Header.Get("X-Bridge-Test") != "1" {
				t.Errorf("request headers not recorded: %v", r.Header)
			}
		}
	}
	if sid == "" {
		t.Fatal("no session id recorded for tools/call")
	}

	// The page must be able to see the file's bytes unchanged: the response
	// body embeds them as they are in the file.
	post := func(sid, body string) (*http.Response, []byte) {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	fileCall, _ := os.ReadFile(callFile)
	var doc struct {
		Result json.RawMessage `json:"result"`
	}
	json.Unmarshal(fileCall, &doc)
	_, body := post(sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"polymer_chain","arguments":{}}}`)
	if !bytes.Contains(body, doc.Result) || !bytes.Contains(doc.Result, []byte("\n      ")) {
		t.Errorf("tools/call body does not embed the file's indented result")
	}
	fileList, _ := os.ReadFile(list)
	_, body = post(sid, `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`)
	if !bytes.Contains(body, bytes.TrimSpace(fileList)) {
		t.Errorf("tools/list body does not embed the file's bytes")
	}

	if resp, _ := post(sid, `{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"file:///etc/passwd"}}`); resp.StatusCode != 200 {
		t.Errorf("resources/read: HTTP %d", resp.StatusCode)
	}
	if !slices.Contains(h.Methods(), "resources/read") {
		t.Errorf("resources/read not recorded: %v", h.Methods())
	}
	if resp, _ := post("", `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("no session: HTTP %d, want 400", resp.StatusCode)
	}
	if resp, _ := post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Errorf("notification: HTTP %d, want 202", resp.StatusCode)
	}
	getResp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	getResp.Body.Close()
	if getResp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: HTTP %d, want 405", getResp.StatusCode)
	}

	h.Restart()
	if resp, _ := post(sid, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("after Restart: HTTP %d, want 404", resp.StatusCode)
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "polymer_chain"}); err == nil {
		t.Errorf("a call on a forgotten session succeeded")
	}
	cs.Close()
	for _, r := range h.Requests() {
		if r.Header.Get("Cookie") != "" || r.Header.Get("Authorization") != "" {
			t.Errorf("credentials reached the server: %v", r.Header)
		}
	}
}

func TestHTTPReplaySSEProgressAndCancel(t *testing.T) {
	h, err := NewHTTPReplay(HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer srv.CloseClientConnections()
	var mu sync.Mutex // guards msgs
	var msgs []string
	first := make(chan struct{}, 1)
	cs := connectHTTP(t, srv.URL, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		if r.Params.ProgressToken == "tok2" {
			select {
			case first <- struct{}{}:
			default:
			}
			return
		}
		mu.Lock()
		msgs = append(msgs, r.Params.Message)
		mu.Unlock()
	}})
	defer cs.Close()

	p := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 3, "intervalMs": 1, "tag": "h"}}
	p.SetProgressToken("tok")
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if sc, _ := res.StructuredContent.(map[string]any); sc["tag"] != "h" {
		t.Errorf("result %v", res.StructuredContent)
	}
	// The last progress may be delivered after the result.
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		got = slices.Clone(msgs)
		mu.Unlock()
		if len(got) >= 3 {
			break
		}
	}
	if !reflect.DeepEqual(got, []string{"h step 1", "h step 2", "h step 3"}) {
		t.Errorf("progress over SSE %v", got)
	}

	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"x": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(res.StructuredContent); string(b) != `{"echo":{"x":1}}` {
		t.Errorf("echo %s", b)
	}

	ctx, cancel := context.WithCancel(context.Background())
	p = &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 100000, "intervalMs": 10, "tag": "c"}}
	p.SetProgressToken("tok2")
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, p)
		errc <- err
	}()
	select {
	case <-first:
	case <-time.After(20 * time.Second):
		t.Fatal("no progress from the long call within 20 s")
	}
	cancel()
	select {
	case err := <-errc:
		if err == nil {
			t.Error("the cancelled call returned a result")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call did not end within 10 s")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(h.Methods(), "notifications/cancelled") {
		if time.Now().After(deadline) {
			t.Fatalf("notifications/cancelled never reached the server: %v", h.Methods())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// FuzzHTTPReplay posts arbitrary bodies, with and without a live session:
// the handler must never panic and every 200 answer must be JSON.
func FuzzHTTPReplay(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}`), true)
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`), true)
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`), false)
	f.Fuzz(func(t *testing.T, body []byte, withSession bool) {
		h, err := NewHTTPReplay(HTTPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sid := ""
		if withSession {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", "/", strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize"}`)))
			sid = rec.Header().Get("Mcp-Session-Id")
		}
		req := httptest.NewRequest("POST", "/", bytes.NewReader(body))
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(ctx)) // a fuzzed slow call ends with ctx
		if rec.Code == http.StatusOK && rec.Header().Get("Content-Type") == "application/json" && !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("invalid JSON answer %q for %q", rec.Body.String(), body)
		}
	})
}
