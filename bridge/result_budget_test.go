package bridge_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	dto "github.com/prometheus/client_model/go"
)

// bigResults answers every tools/call with a result of size bytes of text
// (a JSON body with or without its length, gzip-compressed, or an event),
// and hands everything else to go-sdk's server.
type bigResults struct {
	size    int
	encode  string // "length", "chunked", "gzip", "sse"
	release chan struct{}
}

func (b *bigResults) result(id json.RawMessage) []byte {
	text := strings.Repeat("x", b.size)
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":"` + text + `"}]}}`)
}

func (b *bigResults) handler(t *testing.T) http.Handler {
	real := resumableServer(t)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				ID     json.RawMessage
				Method string
			}
			if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" {
				if b.release != nil {
					<-b.release // all the calls are answered together
				}
				res := b.result(m.ID)
				switch b.encode {
				case "length":
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("Content-Length", strconv.Itoa(len(res)))
					w.Write(res)
				case "chunked":
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusOK)
					for i := 0; i < len(res); i += 1 << 20 {
						w.Write(res[i:min(len(res), i+1<<20)])
						w.(http.Flusher).Flush()
					}
				case "gzip":
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("Content-Encoding", "gzip")
					zw := gzip.NewWriter(w)
					zw.Write(res)
					zw.Close()
				case "sse":
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(http.StatusOK)
					fmt.Fprintf(w, "id: 1\ndata: %s\n\n", res)
				}
				return
			}
		}
		real.ServeHTTP(w, r)
	})
}

// TestResultsInFlightBounded: several large results at once over
// Streamable HTTP, each under the result limit, are read only as far as
// one budget for all of them allows (ResultMemory, reserved before the
// bytes are read, decompressed bytes as they are produced): the calls
// that find no room fail at once with busy, saying why, the others get
// their results byte for byte, the budget's peak never passes its limit,
// and it is all handed back afterwards. Before, six concurrent 255 MiB
// results (or eight gzip ones of 255 KiB on the wire) were each read whole
// and the bridge died out of memory.
func TestResultsInFlightBounded(t *testing.T) {
	const size = 20 << 20 // two do not fit the budget below at once
	for _, encode := range []string{"length", "chunked", "gzip", "sse"} {
		t.Run(encode, func(t *testing.T) {
			leakCheck(t) // first: it runs after the server's cleanup too
			big := &bigResults{size: size, encode: encode, release: make(chan struct{})}
			srv := httptest.NewServer(big.handler(t))
			t.Cleanup(srv.Close)
			t.Cleanup(srv.CloseClientConnections) // writes blocked on a connection the bridge gave up on
			spec := bridge.ServerSpec{Name: "big", Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp", Source: "test", Fingerprint: "sha256:big"}
			const budget = 40 << 20
			h := newHarness(t, bridge.Options{ResultLimit: 32 << 20, ResultMemory: budget, MemoryLimit: 512 << 20}, spec)
			ctx := testCtx(t, 120*time.Second)
			p := h.page(ctx)
			connect(t, ctx, p, 1, spec)
			const calls = 6
			for i := range calls {
				if err := p.Send(map[string]any{"type": "tools:call", "id": 10 + i, "server": spec.Name, "tool": "steps", "arguments": map[string]any{"n": 1}}); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(200 * time.Millisecond) // every call has reached the server
			close(big.release)
			var mu sync.Mutex
			outcomes := map[string]int{}
			want := big.result(json.RawMessage("0"))
			wantResult := want[bytes.Index(want, []byte(`"result":`))+len(`"result":`) : len(want)-1]
			for i := range calls {
				r, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:call" && string(m.ID) == strconv.Itoa(10+i) })
				if err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				switch {
				case r.OK != nil && *r.OK:
					if !bytes.Equal(r.Fields["result"], wantResult) {
						t.Errorf("call %d: a result of %d bytes, not the server's %d", 10+i, len(r.Fields["result"]), len(wantResult))
					}
					outcomes["ok"]++
				case r.Error != nil && r.Error.Code == bridge.CodeBusy:
					if !strings.Contains(r.Error.Message, "no room now") {
						t.Errorf("call %d: busy with %q, want it to say the bridge has no room for the answer", 10+i, r.Error.Message)
					}
					outcomes["busy"]++
				default:
					t.Errorf("call %d: %s", 10+i, r)
				}
				mu.Unlock()
			}
			if outcomes["ok"] == 0 || outcomes["busy"] == 0 {
				t.Errorf("outcomes %v: want some results and some calls refused for room", outcomes)
			}
			// A result's reservation goes back once it has left the tab's
			// queue, just after the page has it.
			var fams map[string]*dto.MetricFamily
			waitFor(t, 10*time.Second, "the result budget to be handed back", func() bool {
				fams = scrape(t, h.srv.URL+"/megane/builder-tools/metrics", nil)
				return value(fams, "megane_bridge_result_memory_bytes", nil) == 0
			})
			peak := value(fams, "megane_bridge_result_memory_peak_bytes", nil)
			// Small buffers (up to 256 KiB each: handshakes, listings, the
			// first growth of each answer) are always given room.
			if slack := int64(calls+2) * 256 << 10; peak <= 0 || peak > float64(budget+slack) {
				t.Errorf("the result budget's peak was %.0f bytes, want 1 to %d", peak, budget+slack)
			}
			t.Logf("abuse: %d results of 20 MiB at once over Streamable HTTP (%s), each under result_limit | read only as far as result_memory (40 MiB) allows, reserved before the bytes are read; the rest answered busy at once | %d ok, %d busy; the budget's peak %.1f MiB", calls, encode, outcomes["ok"], outcomes["busy"], peak/(1<<20))
		})
	}
}

// TestResultNeverFitsIsTooLarge: an answer larger than the whole budget
// for results in flight (though under the result limit) fails with
// too-large, naming the budget, and never with a retry that cannot help.
func TestResultNeverFitsIsTooLarge(t *testing.T) {
	leakCheck(t) // first: it runs after the server's cleanup too
	big := &bigResults{size: 12 << 20, encode: "length"}
	srv := httptest.NewServer(big.handler(t))
	t.Cleanup(srv.Close)
	t.Cleanup(srv.CloseClientConnections) // writes blocked on a connection the bridge gave up on
	spec := bridge.ServerSpec{Name: "big", Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp", Source: "test", Fingerprint: "sha256:big"}
	h := newHarness(t, bridge.Options{ResultLimit: 32 << 20, ResultMemory: 8 << 20}, spec)
	ctx := testCtx(t, 60*time.Second)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "tool": "steps", "arguments": map[string]any{"n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	mustErr(t, r, bridge.CodeTooLargeErr)
	if !strings.Contains(r.Error.Message, "needs more than the bridge's room for results in flight") {
		t.Fatalf("message %q", r.Error.Message)
	}
}

// TestStdioResultsShareTheBudget: results read from a stdio server's
// stdout are held against the same budget until they have left their
// tab's queue: a tab that asks for large results and stops reading holds
// its share, another page's large result that finds no room fails with
// busy at once, and once the stalled tab is gone the room is back.
func TestStdioResultsShareTheBudget(t *testing.T) {
	spec := fakeServer(t, "fake", bridgetest.Mode{})
	const result, budget = 3 << 20, 8 << 20
	h := newHarness(t, bridge.Options{ResultMemory: budget, OutboundBytes: 64 << 20, FrameLimit: 1 << 20}, spec)
	addr := strings.TrimPrefix(h.srv.URL, "http://")
	conn := rawDial(t, addr)
	r := bufio.NewReader(conn)
	b, _ := json.Marshal(map[string]any{"type": "tools:connect", "id": 1, "server": spec.Name, "fingerprint": spec.Fingerprint, "confirmed": true})
	writeMaskedText(t, conn, b)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, _, payload := readFrame(t, r); !strings.Contains(string(payload), `"ok":true`) {
		t.Fatalf("connect: %.300s", payload)
	}
	for id := 2; id < 8; id++ {
		b, _ := json.Marshal(map[string]any{"type": "tools:call", "id": id, "server": spec.Name, "tool": "big", "arguments": map[string]any{"bytes": result}})
		writeMaskedText(t, conn, b)
	}
	ctx := testCtx(t, 2*time.Minute)
	var held float64
	waitFor(t, time.Minute, "the stalled tab's results to fill the budget", func() bool {
		held = value(scrape(t, h.srv.URL+"/megane/builder-tools/metrics", nil), "megane_bridge_result_memory_bytes", nil)
		return held > budget-result
	})
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	m, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 10, "server": spec.Name, "tool": "big", "arguments": map[string]any{"bytes": result}})
	if err != nil {
		t.Fatal(err)
	}
	mustErr(t, m, bridge.CodeBusy)
	if !strings.Contains(m.Error.Message, "no room now") {
		t.Fatalf("busy with %q, want it to say the bridge has no room for the result", m.Error.Message)
	}
	conn.Close()
	waitFor(t, time.Minute, "the stalled tab's share to be handed back", func() bool {
		return value(scrape(t, h.srv.URL+"/megane/builder-tools/metrics", nil), "megane_bridge_result_memory_bytes", nil) == 0
	})
	m, err = p.Request(ctx, map[string]any{"type": "tools:call", "id": 11, "server": spec.Name, "tool": "big", "arguments": map[string]any{"bytes": result}})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, m)
	t.Logf("abuse: a tab asks for 3 MiB stdio results and stops reading, another page asks for one | the results held count against result_memory (8 MiB): the other page's call is answered busy at once, and gets its result once the stalled tab is gone | %.1f MiB held for the stalled tab; busy, then ok", held/(1<<20))
}
