package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resumableServer is go-sdk's Streamable HTTP server with an event store
// (so it can resume streams) and one tool, "steps": n progress
// notifications 100 ms apart, then a text result "done <n>".
func resumableServer(t *testing.T) http.Handler {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "resumable", Version: "1.0.0"}, nil)
	server.AddTool(&mcp.Tool{Name: "steps", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ N int }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			for i := 1; i <= args.N; i++ {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(100 * time.Millisecond):
				}
				if tok := req.Params.GetProgressToken(); tok != nil {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: float64(args.N), Message: fmt.Sprintf("step %d", i)})
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("done %d", args.N)}}}, nil
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
}

// cuttingProxy is a reverse proxy in front of a Streamable HTTP server that
// cuts a tools/call's event stream in the middle of an event once it has
// passed cutAfter events, as a proxy or load balancer that ends long
// responses does. failResume makes it refuse every GET that resumes a
// stream (Last-Event-ID), as if the server had gone.
type cuttingProxy struct {
	cutAfter   int
	failResume atomic.Bool
	cuts       atomic.Int32
	mu         sync.Mutex
	resumes    []string // the Last-Event-ID of each resuming GET
}

func (p *cuttingProxy) handler(t *testing.T, backend string) http.Handler {
	u, _ := url.Parse(backend)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // the cuts are deliberate
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method == http.MethodPost && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") && resp.Request.Header.Get("X-Test-Call") == "1" {
			resp.Body = &cutBody{src: resp.Body, after: p.cutAfter, cuts: &p.cuts}
		}
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Last-Event-ID"); r.Method == http.MethodGet && id != "" {
			p.mu.Lock()
			p.resumes = append(p.resumes, id)
			p.mu.Unlock()
			if p.failResume.Load() {
				panic(http.ErrAbortHandler) // the connection drops
			}
		}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"tools/call"`)) {
				r.Header.Set("X-Test-Call", "1")
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		rp.ServeHTTP(w, r)
	})
}

func (p *cuttingProxy) resumeIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.resumes...)
}

// cutBody passes a stream through until `after` events have passed, then
// the next one up to a few bytes into its JSON data, then fails.
type cutBody struct {
	src    io.ReadCloser
	after  int
	cuts   *atomic.Int32
	events int
	prev   byte
	tail   []byte // bytes passed since the cut point
}

var errCut = errors.New("cut by the proxy")

func (c *cutBody) Read(b []byte) (int, error) {
	if i := bytes.Index(c.tail, []byte("data: {")); i >= 0 && len(c.tail) >= i+16 {
		c.cuts.Add(1)
		return 0, errCut
	}
	if len(b) > 1 {
		b = b[:1] // byte by byte: the cut lands exactly
	}
	n, err := c.src.Read(b)
	if n == 1 {
		switch {
		case c.events >= c.after:
			c.tail = append(c.tail, b[0])
		case b[0] == '\n' && c.prev == '\n':
			c.events++
		}
		c.prev = b[0]
	}
	return n, err
}

func (c *cutBody) Close() error { return c.src.Close() }

// TestSSEResume: a proxy cuts a call's event stream in the middle of an
// event; the bridge resumes it (GET with Last-Event-ID) and the call still
// completes, with its progress and result, and the page hears nothing of
// the cut. When resuming fails, the call is answered with one line saying
// the stream was cut and could not be resumed.
func TestSSEResume(t *testing.T) {
	backend := httptest.NewServer(resumableServer(t))
	t.Cleanup(backend.Close)
	proxy := &cuttingProxy{cutAfter: 3}
	front := httptest.NewServer(proxy.handler(t, backend.URL))
	t.Cleanup(front.Close)
	spec := bridge.ServerSpec{Name: "behind-proxy", Transport: bridge.TransportHTTP, URL: front.URL + "/mcp", Source: "test", Fingerprint: "sha256:proxy"}

	t.Run("resumed", func(t *testing.T) {
		ctx := testCtx(t, 60*time.Second)
		h := newHarness(t, bridge.Options{}, spec)
		p := h.page(ctx)
		connect(t, ctx, p, 1, spec)
		r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "tool": "steps", "arguments": map[string]any{"n": 6}})
		if err != nil {
			t.Fatal(err)
		}
		mustOK(t, r)
		if !strings.Contains(string(r.Fields["result"]), `"done 6"`) {
			t.Fatalf("result: %s", r.Fields["result"])
		}
		if proxy.cuts.Load() == 0 || len(proxy.resumeIDs()) == 0 {
			t.Fatalf("the proxy cut %d streams and saw resumes %q: the test did not test resuming", proxy.cuts.Load(), proxy.resumeIDs())
		}
		var steps []string
		for _, m := range p.All() {
			if m.Type == "tools:progress" && string(m.ID) == "2" {
				steps = append(steps, m.Str("message"))
			}
			if m.Type == "tools:closing" || m.Type == "tools:serverClosed" {
				t.Fatalf("the page was told about the cut: %s", m.Raw)
			}
		}
		// In order and through to the last step; a step still queued for
		// the page when the next arrives (the resumed stream replays in a
		// burst) is replaced by it, so steps may be skipped (issue 28).
		last := 0
		for _, st := range steps {
			n, err := strconv.Atoi(strings.TrimPrefix(st, "step "))
			if err != nil || n <= last {
				t.Fatalf("progress seen by the page: %q", steps)
			}
			last = n
		}
		if last != 6 {
			t.Fatalf("progress seen by the page: %q, want it to end with step 6", steps)
		}
		if !strings.Contains(h.logBuf.String(), "resumed a cut event stream") {
			t.Fatalf("the log does not record the resumption:\n%s", h.logBuf.String())
		}
	})

	t.Run("resume fails", func(t *testing.T) {
		proxy.failResume.Store(true)
		ctx := testCtx(t, 60*time.Second)
		h := newHarness(t, bridge.Options{StreamRetries: 1}, spec)
		p := h.page(ctx)
		connect(t, ctx, p, 1, spec)
		r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "tool": "steps", "arguments": map[string]any{"n": 6}})
		if err != nil {
			t.Fatal(err)
		}
		mustErr(t, r, bridge.CodeServerFailed)
		if !strings.Contains(r.Error.Message, "behind-proxy: the server's event stream was cut and could not be resumed") {
			t.Fatalf("message: %q", r.Error.Message)
		}
	})
}
