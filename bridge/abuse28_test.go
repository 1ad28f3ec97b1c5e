package bridge_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

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

// TestServerTextNotUTF8: bytes that are not UTF-8 from a tool server never
// reach the page (a text frame must be UTF-8: browsers and Node drop the
// socket, and every call of the tab with it). A result that is not UTF-8
// fails its call server-failed, naming the server and the byte; a tool
// whose definition is not is left out of the listing and named in
// droppedTools; serverInfo and instructions are shown with U+FFFD in place
// of such bytes. The tab carries on: its next call is answered.
func TestServerTextNotUTF8(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	dir := t.TempDir()
	// Files, not the Mode: the environment cannot carry such bytes to the
	// server.
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	spec := fakeServer(t, "latin", bridgetest.Mode{
		SelfFile: write("self.json", "{\"serverInfo\":{\"name\":\"latin\",\"version\":\"1\",\"title\":\"Caf\xe9\"},\"instructions\":\"Units: \xb5m\"}"),
		FixtureList: write("list.json", "{\"tools\":[{\"name\":\"badtool\",\"description\":\"caf\xe9\",\"inputSchema\":{\"type\":\"object\"}},"+
			`{"name":"badresult","inputSchema":{"type":"object"}},{"name":"echo","inputSchema":{"type":"object"}}]}`),
		FixtureCalls: map[string]string{"badresult": write("bad-result.json", "{\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok \xff\xfe bytes\"}]}}")},
	})
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)
	r := connect(t, ctx, p, "c", spec)
	var dropped []struct{ Name, Reason string }
	if err := json.Unmarshal(r.Fields["droppedTools"], &dropped); err != nil || len(dropped) != 1 || dropped[0].Name != "badtool" || !strings.Contains(dropped[0].Reason, "not valid UTF-8: byte") {
		t.Errorf("droppedTools = %s, want badtool, not valid UTF-8", r.Fields["droppedTools"])
	}
	if bytes.Contains(r.Fields["tools"], []byte("badtool")) {
		t.Errorf("badtool is still listed: %s", r.Fields["tools"])
	}
	if !strings.Contains(string(r.Fields["serverInfo"]), "Caf\uFFFD") || !strings.Contains(string(r.Fields["instructions"]), "\uFFFDm") {
		t.Errorf("serverInfo %s and instructions %s: want U+FFFD in place of the bytes", r.Fields["serverInfo"], r.Fields["instructions"])
	}
	r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": "bad", "server": "latin", "tool": "badresult"})
	if err != nil {
		t.Fatal(err)
	}
	mustErr(t, r, bridge.CodeServerFailed)
	if !strings.Contains(r.Error.Message, "latin: the result of badresult is not valid UTF-8 (byte 38 of it is 0xff)") {
		t.Errorf("the message does not name the server and the byte: %q", r.Error.Message)
	}
	r, err = p.Request(ctx, map[string]any{"type": "tools:call", "id": "then", "server": "latin", "tool": "echo", "arguments": map[string]any{"s": "é"}})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	bad := 0
	for _, m := range p.All() {
		if !utf8.Valid(m.Raw) {
			bad++
			t.Errorf("the page received a message that is not UTF-8: %q", m.Raw)
		}
	}
	t.Logf("abuse: bytes not UTF-8 in a result, a tool, serverInfo and instructions | never in a text frame: the call fails server-failed, the tool is dropped, the text gets U+FFFD | %d of %d messages not UTF-8, the tab's next call answered", bad, len(p.All()))
}

// TestProgressPaced: a call's progress reaches the page at most once per
// ProgressInterval (50 ms by default), whatever the server's pace, and the
// last progress before the result is always the server's last; with the
// pacing off, a call reporting every 50 ms gets every step through.
func TestProgressPaced(t *testing.T) {
	cases := []struct {
		name     string
		interval time.Duration // Options.ProgressInterval
		paceBy   time.Duration // the pace expected (0: none)
		steps    int
		stepMs   int
		minSeen  int // progress messages the page must see at least
	}{
		{name: "tight loop, default pace", steps: 3000, paceBy: 50 * time.Millisecond, minSeen: 1},
		{name: "a step every 30 ms, paced by 100 ms", interval: 100 * time.Millisecond, paceBy: 100 * time.Millisecond, steps: 20, stepMs: 30, minSeen: 2},
		{name: "a step every 50 ms, no pacing", interval: -1, steps: 20, stepMs: 50, minSeen: 16},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeServer(t, "steps", bridgetest.Mode{})
			h := newHarness(t, bridge.Options{ProgressInterval: tc.interval}, srv)
			ctx := testCtx(t, time.Minute)
			p := h.page(ctx)
			connect(t, ctx, p, "c", srv)
			start := time.Now()
			r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": "x", "server": "steps", "tool": "slow",
				"arguments": map[string]any{"steps": tc.steps, "intervalMs": tc.stepMs, "tag": "p"}})
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			mustOK(t, r)
			seen, last := 0, 0.0
			for _, m := range p.All() {
				if m.Type == "tools:progress" {
					seen++
					var v struct{ Progress float64 }
					_ = json.Unmarshal(m.Raw, &v)
					if v.Progress <= last {
						t.Errorf("progress %v after %v", v.Progress, last)
					}
					last = v.Progress
				}
			}
			if last != float64(tc.steps) {
				t.Errorf("the last progress before the result was %v, want %d", last, tc.steps)
			}
			if seen < tc.minSeen {
				t.Errorf("%d progress messages, want at least %d", seen, tc.minSeen)
			}
			if tc.paceBy > 0 {
				// One at the start, one per interval after, and the last
				// ahead of the result.
				if most := int(took/tc.paceBy) + 2; seen > most {
					t.Errorf("%d progress messages in %s, want at most %d (one per %s)", seen, took.Round(time.Millisecond), most, tc.paceBy)
				}
				t.Logf("abuse: a tool sends %d progress notifications, one every %d ms, to a page that reads (ProgressInterval %s) | at most one progress per interval reaches the page, and the last before the result | %d progress messages in %s, the last step %v", tc.steps, tc.stepMs, tc.paceBy, seen, took.Round(time.Millisecond), last)
			} else {
				t.Logf("%d steps in %s: %d progress messages reached the page", tc.steps, took.Round(time.Millisecond), seen)
			}
		})
	}
}

// TestChattyServerKeepsItsPage: a page that reads is never closed for
// what others make it receive. A tool that sends 2,000 progress
// notifications in a tight loop (four such calls at once) used to fill the
// tab's 256-message queue and close a page reading as fast as it could with
// 4408, losing its calls on other servers; and so did a page that sent
// more than 256 requests before it read. Now a call's progress still
// queued is replaced by the next, and the queue is bounded in bytes only.
// Bounds: the reading page is not closed, gets every result (the chatty
// calls' last progress before their result) and its calls on another
// server; the page that sent 20,000 requests before reading gets 20,000
// answers; a page that truly does not read is still closed with 4408 once
// its queue passes OutboundBytes (1 MiB there), or, when what it is sent
// never piles up, cut once a write stalls past WriteTimeout (2 s there).
func TestChattyServerKeepsItsPage(t *testing.T) {
	chatty := fakeServer(t, "chatty", bridgetest.Mode{})
	other := fakeServer(t, "other", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{}, chatty, other)
	ctx := testCtx(t, 2*time.Minute)
	addr := strings.TrimPrefix(h.srv.URL, "http://")

	t.Run("chatty server", func(t *testing.T) {
		p := h.page(ctx)
		connect(t, ctx, p, "c1", chatty)
		connect(t, ctx, p, "c2", other)
		const steps, calls = 2000, 4
		for i := range calls {
			if err := p.Send(map[string]any{"type": "tools:call", "id": i, "server": "chatty", "tool": "slow",
				"arguments": map[string]any{"steps": steps, "intervalMs": 0, "tag": "flood"}}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 20 {
			r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": "o" + strconv.Itoa(i), "server": "other", "tool": "echo", "arguments": map[string]any{"i": i}})
			if err != nil {
				t.Fatalf("call %d on the other server: %v (%v)", i, err, p.Err())
			}
			mustOK(t, r)
		}
		for i := range calls {
			r, err := p.Reply(ctx, "tools:call", i)
			if err != nil {
				t.Fatalf("chatty call %d: %v (%v)", i, err, p.Err())
			}
			mustOK(t, r)
		}
		progress, last := 0, map[string]float64{}
		for _, m := range p.All() {
			if m.Type == "tools:closing" {
				t.Fatalf("the page was closed: %s", m)
			}
			if m.Type == "tools:progress" {
				progress++
				var v struct{ Progress float64 }
				_ = json.Unmarshal(m.Raw, &v)
				last[string(m.ID)] = v.Progress
			}
		}
		for i := range calls {
			if last[strconv.Itoa(i)] != steps {
				t.Errorf("call %d: last progress %v, want %d", i, last[strconv.Itoa(i)], steps)
			}
		}
		t.Logf("abuse: a tool sends %d progress notifications in a tight loop, %d calls at once, to a page that reads | the page is never closed; its calls on another server and the final results arrive | %d of %d progress delivered (the rest replaced while queued), 20 of 20 other calls and %d of %d results", steps, calls, progress, steps*calls, calls, calls)
	})

	t.Run("requests before reading", func(t *testing.T) {
		const n = 20000
		conn := rawDial(t, addr)
		defer conn.Close()
		req, _ := json.Marshal(map[string]any{"type": "tools:servers", "id": 1})
		for range n {
			writeMaskedText(t, conn, req)
		}
		r := bufio.NewReader(conn)
		conn.SetReadDeadline(time.Now().Add(time.Minute))
		got := 0
		for got < n {
			_, opcode, payload, err := tryReadFrame(r)
			if err != nil || opcode == 8 || strings.Contains(string(payload), `"tools:closing"`) {
				t.Fatalf("after %d answers: %v %.200s", got, err, payload)
			}
			got++
		}
		t.Logf("abuse: a page sends %d requests before it reads | not closed: every answer arrives | %d of %d answers", n, got, n)
	})

	t.Run("page that does not read", func(t *testing.T) {
		h2 := newHarness(t, bridge.Options{OutboundBytes: 1 << 20})
		conn := rawDial(t, strings.TrimPrefix(h2.srv.URL, "http://"))
		defer conn.Close()
		req, _ := json.Marshal(map[string]any{"type": "tools:servers", "id": 1})
		// Loopback socket buffers hold megabytes of answers before the
		// bridge's queue starts to fill, and how many depends on the
		// machine: send until the bridge closes the page, for up to 2m. The
		// writes go on in a goroutine of their own, with no deadline: on a
		// busy machine a write may block for long while the bridge is slow
		// to read, and how fast the bridge gets there is not the bound.
		start := time.Now()
		var sent atomic.Int64
		var werr error
		writing := make(chan struct{})
		go func() {
			defer close(writing)
			hdr := []byte{0x81, 0x80 | byte(len(req)), 0, 0, 0, 0}
			for !strings.Contains(h2.logBuf.String(), "tab not reading") {
				if _, err := conn.Write(append(hdr, req...)); err != nil {
					werr = err // the bridge closed the socket, or the test did
					return
				}
				sent.Add(1)
			}
		}()
		closed := func() bool { return strings.Contains(h2.logBuf.String(), "tab not reading") }
		for !closed() && time.Since(start) < 2*time.Minute {
			time.Sleep(20 * time.Millisecond)
		}
		took := time.Since(start)
		conn.Close() // ends a write still blocked
		<-writing
		if !closed() {
			t.Fatalf("a page that read nothing after %d requests in %s was not closed (last write: %v); the bridge's log:\n%s", sent.Load(), took.Round(time.Millisecond), werr, h2.logBuf.String())
		}
		t.Logf("abuse: a page sends requests and never reads | closed with 4408 once its queue passes OutboundBytes (1 MiB) | closed after %d requests, %s", sent.Load(), took.Round(time.Millisecond))
	})

	t.Run("page that does not read a chatty call", func(t *testing.T) {
		// Its progress never piles up (each replaces the last), so it is
		// the stalled write that ends it: cut once a write passes
		// WriteTimeout, its call cancelled. Unpaced, so that the progress
		// fills the socket buffers in seconds (paced, twenty small
		// messages a second would take hours, and the pong timeout ends
		// the tab first).
		const writeTimeout = 2 * time.Second
		h3 := newHarness(t, bridge.Options{WriteTimeout: writeTimeout, ProgressInterval: -1}, chatty)
		conn := rawDial(t, strings.TrimPrefix(h3.srv.URL, "http://"))
		defer conn.Close()
		br := bufio.NewReader(conn)
		b, _ := json.Marshal(map[string]any{"type": "tools:connect", "id": 1, "server": "chatty", "fingerprint": chatty.Fingerprint, "confirmed": true})
		writeMaskedText(t, conn, b)
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, _, payload := readFrame(t, br); !strings.Contains(string(payload), `"ok":true`) {
			t.Fatalf("connect: %.300s", payload)
		}
		b, _ = json.Marshal(map[string]any{"type": "tools:call", "id": 2, "server": "chatty", "tool": "slow",
			"arguments": map[string]any{"steps": 10_000_000, "intervalMs": 0}})
		start := time.Now()
		writeMaskedText(t, conn, b)
		// How long the socket buffers take to fill depends on the system
		// and on how fast the server chatters: seconds on Linux, over 22 s
		// under wine (a CI run). Wait up to 2m.
		waitFor(t, 2*time.Minute, "the tab to be cut", func() bool { return strings.Contains(h3.logBuf.String(), "writing to the tab failed") })
		took := time.Since(start)
		t.Logf("abuse: a chatty call streams progress to a page that never reads | cut once a write stalls past WriteTimeout (%s), after the socket buffers fill | cut after %s", writeTimeout, took.Round(time.Millisecond))
	})
}

// TestStalledFramesBounded: tabs that each send most of a large frame and
// then stop hold, together, no more than InboundMemory (the frames are read
// in pieces, each counted before it is read), and the tabs that cannot
// have their share are closed with 1013 and a reason; another user's
// connect and call are still answered, and the memory is handed back once
// the tabs are gone. Before the budget, 24 such tabs held 2.3 GB against a
// 1 GiB ceiling and everyone else was answered busy. Bounds: the heap grows
// by at most InboundMemory (32 MiB) + 16 MiB while 8 tabs stall with
// 12 MiB each (96 MiB sent); it is back within 16 MiB once they close.
func TestStalledFramesBounded(t *testing.T) {
	spec := fakeServer(t, "fake", bridgetest.Mode{})
	const budget, tabs, frame, sent = 32 << 20, 8, 15 << 20, 12 << 20
	h := newHarness(t, bridge.Options{InboundMemory: budget, InboundLimit: 16 << 20}, spec)
	ctx := testCtx(t, 2*time.Minute)
	addr := strings.TrimPrefix(h.srv.URL, "http://")
	hdr := []byte{0x81, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint64(hdr[2:10], frame)
	payload := append(append(hdr, `{"type":"tools:servers","id":1,"pad":"`...), bytes.Repeat([]byte("x"), sent)...)
	base := heapAlloc()
	debug.FreeOSMemory()
	baseMapped := heldBytes()

	// Each attacker: the header of a 15 MiB text frame (mask 0: the payload
	// as is), 12 MiB of it, then nothing.
	conns := make([]net.Conn, tabs)
	var wg sync.WaitGroup
	for i := range conns {
		conns[i] = rawDial(t, addr)
		defer conns[i].Close()
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			c.SetWriteDeadline(time.Now().Add(30 * time.Second))
			_, _ = c.Write(payload) // fails once the bridge closes the tab
		}(conns[i])
	}
	wg.Wait()
	// The writes end once the kernel has the bytes; the bridge reads them
	// at its own pace (slowly under wine, or on a loaded machine): wait
	// until it has closed a tab with 1013 (audited as refused, code=1013),
	// at most 30 s, then for the closed tabs' readers to end.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(h.logBuf.String(), "code=1013") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // the closed tabs' readers end within 2 s
	held := heapAlloc()

	// Another user's page is served meanwhile.
	p := h.page(ctx)
	connect(t, ctx, p, "c", spec)
	r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": "e", "server": "fake", "tool": "echo", "arguments": map[string]any{"x": 1}})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)

	closed := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(time.Second))
		br := bufio.NewReader(c)
		for {
			_, _, payload, err := tryReadFrame(br)
			if err != nil {
				break
			}
			if strings.Contains(string(payload), `"tools:closing"`) && strings.Contains(string(payload), "1013") {
				closed++
				break
			}
		}
		c.Close()
	}
	waitFor(t, 10*time.Second, "the tabs to end", func() bool { return strings.Count(h.logBuf.String(), "tab closed") >= tabs })
	mapped := heldBytes() // not collected first: what the bridge handed back itself
	after := heapAlloc()
	runtime.KeepAlive(payload)
	t.Logf("abuse: %d tabs each send %d MiB of a %d MiB frame and stall | at most InboundMemory (%d MiB) + 16 MiB held; 1013 for those over their share; another page served; memory back within 16 MiB (heap) and 32 MiB (mapped) | heap +%d MiB while stalled, +%d MiB after (mapped %+d MiB); %d tabs closed with 1013; the other page's connect and call answered",
		tabs, sent>>20, frame>>20, budget>>20, (held-base)>>20, (after-base)>>20, (mapped-baseMapped)>>20, closed)
	if held-base > budget+16<<20 {
		t.Errorf("the stalled frames hold %d MiB; the bound is %d MiB", (held-base)>>20, (budget+16<<20)>>20)
	}
	if closed == 0 {
		t.Errorf("no stalled tab was closed with 1013")
	}
	if after-base > 16<<20 || mapped-baseMapped > 32<<20 {
		t.Errorf("%d MiB still held after the tabs closed (%d MiB mapped)", (after-base)>>20, (mapped-baseMapped)>>20)
	}
}
