package bridge_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
)

// hostileEventStream answers every tools/call with a text/event-stream
// that never ends its event: line after line of what line() returns,
// never a blank line, until the bridge stops reading or cap bytes are
// written. Everything else goes to go-sdk's server (resumableServer).
type hostileEventStream struct {
	line    func(i int) []byte
	cap     int64
	written atomic.Int64
}

func (h *hostileEventStream) handler(t *testing.T) http.Handler {
	real := resumableServer(t)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"tools/call"`)) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				f := w.(http.Flusher)
				rc := http.NewResponseController(w)
				for i := 0; h.written.Load() < h.cap && r.Context().Err() == nil; i++ {
					// A reader that stopped reading ends the stream.
					_ = rc.SetWriteDeadline(time.Now().Add(5 * time.Second))
					n, err := w.Write(h.line(i))
					h.written.Add(int64(n))
					if err != nil {
						return
					}
					f.Flush()
				}
				return
			}
		}
		real.ServeHTTP(w, r)
	})
}

// TestEventStreamFieldsBounded: a Streamable HTTP server that answers a
// call with an event made only of lines other than data (1 MiB id: lines,
// 1 MiB comments, or endless short comments), never ending it, used to be
// held line by line until the bridge ran out of memory (4 GiB sent: fatal
// error: out of memory). The bridge now stops reading at a small bound,
// the call fails at once with one line saying why, and the same server's
// next call is answered.
func TestEventStreamFieldsBounded(t *testing.T) {
	mib := strings.Repeat("x", 1<<20)
	for _, tc := range []struct {
		name string
		line func(int) []byte
	}{
		{"1 MiB id lines", func(i int) []byte { return []byte("id: " + mib + "\n") }},
		{"1 MiB comments", func(i int) []byte { return []byte(": " + mib + "\n") }},
		{"id and comments alternating", func(i int) []byte {
			if i%2 == 0 {
				return []byte("id: " + mib + "\n")
			}
			return []byte(":" + mib + "\n")
		}},
		{"endless short comments", func(i int) []byte { return []byte(": keep-alive " + strings.Repeat("k", 100) + "\n") }},
		{"endless short id lines", func(i int) []byte { return []byte("id: 1234567890\n") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t) // first: it runs after the server's cleanup too
			const cap = 512 << 20
			hostile := &hostileEventStream{line: tc.line, cap: cap}
			srv := httptest.NewServer(hostile.handler(t))
			t.Cleanup(srv.Close)
			// Its writes may still be blocked on a connection the bridge
			// gave up on (under wine, closing it does not end them).
			t.Cleanup(srv.CloseClientConnections)
			spec := bridge.ServerSpec{Name: "hostile", Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp", Source: "test", Fingerprint: "sha256:hostile"}
			ctx := testCtx(t, 60*time.Second)
			h := newHarness(t, bridge.Options{}, spec)
			p := h.page(ctx)
			connect(t, ctx, p, 1, spec)
			r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "tool": "steps", "arguments": map[string]any{"n": 1}})
			if err != nil {
				t.Fatal(err)
			}
			mustErr(t, r, bridge.CodeServerFailed)
			if !strings.Contains(r.Error.Message, "event stream") || !strings.Contains(r.Error.Message, "other than data") {
				t.Fatalf("the call failed with %q, want one line saying the event stream's other lines passed their bound", r.Error.Message)
			}
			// The bridge stopped reading: what the server got out is its
			// socket buffers' worth, not the stream.
			if w := hostile.written.Load(); w >= 64<<20 {
				t.Fatalf("the server wrote %d MiB before the bridge stopped reading", w>>20)
			}
			t.Logf("abuse: a Streamable HTTP server answers a call with an event of %s, never ending it | the call fails at once with one line (4 KiB a line other than data, 64 KiB an event) and the bridge stops reading | the server got %.1f MiB out before the call failed", tc.name, float64(hostile.written.Load())/(1<<20))
		})
	}
}
