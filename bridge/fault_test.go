package bridge_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"go.uber.org/goleak"
)

// The fault tests: every way a tool server or a tab can fail that
// relay_cases_test.go does not already cover, each checked the way a person
// would notice it: how long the outcome takes (a generous bound), the one
// line they read, and that nothing is left behind. Processes are looked for
// in /proc by a marker in their environment (and the keeper by its command
// line), never through the bridge's own bookkeeping; goroutines with goleak.

// faultServer is fakeServer with a marker in the server's environment, so
// that /proc can tell whether any of its processes is left. The name gets a
// random suffix, which also marks the keeper's command line.
func faultServer(t testing.TB, base string, mode bridgetest.Mode) (bridge.ServerSpec, string) {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	marker := base + "-" + hex.EncodeToString(b[:])
	if mode.Name == "" {
		mode.Name = base
	}
	spec := fakeServer(t, marker, mode)
	spec.Env["MEGANE_FAULT_MARK"] = marker
	return spec, marker
}

// procsMarked lists the processes (zombies included, marked "Z") whose
// environment carries marker, or whose command line is a keeper for it.
func procsMarked(marker string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		env, _ := os.ReadFile(filepath.Join(dir, "environ"))
		cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		hit := bytes.Contains(env, []byte("MEGANE_FAULT_MARK="+marker+"\x00")) ||
			bytes.Contains(cmd, []byte("megane-bridge-keeper\x00"+marker))
		if !hit {
			continue
		}
		state, _, ok := bridgetest.ProcStat(pid)
		if !ok {
			state = "?"
		}
		found = append(found, fmt.Sprintf("%d(%s)", pid, state))
	}
	return found
}

// zombieChildren lists this process's children that exited and were not
// reaped.
func zombieChildren() []int {
	entries, _ := os.ReadDir("/proc")
	var z []int
	me := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, ppid, ok := bridgetest.ProcStat(pid); ok && state == "Z" && ppid == me {
			z = append(z, pid)
		}
	}
	return z
}

// noneLeft waits (up to bound) until no process carries marker and no
// child of the test process is a zombie (a keeper that has just exited is
// one until the bridge reaps it), and fails naming what is left.
func noneLeft(t testing.TB, marker string, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		left := procsMarked(marker)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of %s left after %s: %v", marker, bound, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		z := zombieChildren()
		if len(z) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("unreaped children of the test process after %s: %v", bound, z)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leakCheck registers a goroutine check that runs after every cleanup the
// test registers later (the harness, the pages). newHarness calls it, so
// every relay test checks that nothing it started is left; a test that
// sets up something with a cleanup of its own before the harness (a server
// the bridge talks to) calls it first, and newHarness then adds no second
// check, which would run before that cleanup.
func leakCheck(t testing.TB) {
	t.Helper()
	if _, dup := leakChecked.LoadOrStore(t, true); dup {
		return
	}
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		leakChecked.Delete(t)
		if err := goleak.Find(opt); err != nil {
			t.Errorf("goroutines left: %v", err)
		}
	})
}

// leakChecked holds the tests that registered leakCheck (test-only state).
var leakChecked sync.Map

// within fails unless f returns within d; it returns f's result.
func within[T any](t testing.TB, d time.Duration, what string, f func() T) T {
	t.Helper()
	start := time.Now()
	v := f()
	if el := time.Since(start); el > d {
		t.Fatalf("%s took %s, more than %s", what, el.Round(time.Millisecond), d)
	}
	return v
}

func oneLineMsg(t testing.TB, m *bridgetest.Msg) {
	t.Helper()
	if m.Error == nil || m.Error.Message == "" || strings.ContainsAny(m.Error.Message, "\r\n") || len(m.Error.Message) > 500 {
		t.Fatalf("a failure must carry one line for the person: %s", m)
	}
}

// TestFaultsLeaveNothing runs the server faults whose replies
// relay_cases_test.go checks, and checks what those tests do not: how long
// the outcome takes, and that no process (by /proc) and no goroutine is
// left once the page disconnects.
func TestFaultsLeaveNothing(t *testing.T) {
	cases := []struct {
		name  string
		mode  bridgetest.Mode
		opts  bridge.Options
		call  map[string]any // nil: the fault is in the connect
		code  string
		words []string // the message must contain these
		bound time.Duration
	}{
		{name: "crash mid-call", call: map[string]any{"tool": "crash"}, code: bridge.CodeServerFailed,
			words: []string{"status 3", "simulated crash"}, bound: 10 * time.Second},
		{name: "exit before initialize", mode: bridgetest.Mode{ExitBeforeInit: true}, code: bridge.CodeServerFailed,
			words: []string{"status 2", "simulated failure before initialize"}, bound: 10 * time.Second},
		{name: "initialize never answered", mode: bridgetest.Mode{HangInit: true}, opts: bridge.Options{InitTimeout: 500 * time.Millisecond},
			code: bridge.CodeServerFailed, words: []string{"did not answer initialize"}, bound: 10 * time.Second},
		{name: "call never answered", call: map[string]any{"tool": "slow", "timeoutMs": 300,
			"arguments": map[string]any{"steps": 1, "intervalMs": 3_600_000}}, code: bridge.CodeTimeout,
			words: []string{"did not finish within 300ms"}, bound: 10 * time.Second},
		{name: "result over the limit", opts: bridge.Options{ResultLimit: 256 << 10},
			call: map[string]any{"tool": "big", "arguments": map[string]any{"bytes": 4 << 20}},
			code: bridge.CodeTooLargeErr, words: []string{"limit of 262144 bytes"}, bound: 10 * time.Second},
		{name: "json-rpc error", call: map[string]any{"tool": "fail", "arguments": map[string]any{"code": -32000, "message": "no GPU"}},
			code: bridge.CodeServerFailed, words: []string{"no GPU"}, bound: 10 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			ctx := testCtx(t, 60*time.Second)
			spec, marker := faultServer(t, "faulty", tc.mode)
			h := newHarness(t, tc.opts, spec)
			p := h.page(ctx)
			var r *bridgetest.Msg
			if tc.call == nil {
				r = within(t, tc.bound, "the failed connect", func() *bridgetest.Msg {
					r, err := p.Request(ctx, map[string]any{"type": "tools:connect", "id": 1, "server": spec.Name,
						"fingerprint": spec.Fingerprint, "confirmed": true})
					if err != nil {
						t.Fatal(err)
					}
					return r
				})
			} else {
				connect(t, ctx, p, 1, spec)
				req := map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "arguments": map[string]any{}}
				for k, v := range tc.call {
					req[k] = v
				}
				r = within(t, tc.bound, "the failed call", func() *bridgetest.Msg {
					r, err := p.Request(ctx, req)
					if err != nil {
						t.Fatal(err)
					}
					return r
				})
			}
			mustErr(t, r, tc.code)
			oneLineMsg(t, r)
			for _, w := range tc.words {
				if !strings.Contains(r.Error.Message, w) {
					t.Errorf("the message %q lacks %q", r.Error.Message, w)
				}
			}
			// Disconnect (or close the page) and nothing of the server is left.
			p.Request(ctx, map[string]any{"type": "tools:disconnect", "id": 3, "server": spec.Name})
			p.Close()
			noneLeft(t, marker, 10*time.Second)
		})
	}
}

// TestFaultHangInitGiveUp: the page gives up on a start that never ends
// (tools:cancel on the connect's id); it is answered at once and the
// process is stopped, found gone in /proc.
func TestFaultHangInitGiveUp(t *testing.T) {
	leakCheck(t)
	ctx := testCtx(t, 30*time.Second)
	j := journal(t)
	spec, marker := faultServer(t, "hang", bridgetest.Mode{HangInit: true, Journal: j})
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)
	p.Send(map[string]any{"type": "tools:connect", "id": "c", "server": spec.Name, "fingerprint": spec.Fingerprint, "confirmed": true})
	waitFor(t, 10*time.Second, "initialize to reach the server", func() bool {
		entries, _ := bridgetest.ReadJournal(j)
		return countOf(bridgetest.Methods(entries), "initialize") == 1
	})
	if len(procsMarked(marker)) == 0 {
		t.Fatal("the server is not running while it starts")
	}
	r := within(t, 5*time.Second, "the cancelled connect's answer", func() *bridgetest.Msg {
		p.Send(map[string]any{"type": "tools:cancel", "id": "c"})
		r, err := p.Reply(ctx, "tools:connect", "c")
		if err != nil {
			t.Fatal(err)
		}
		return r
	})
	mustErr(t, r, bridge.CodeCancelled)
	// Stop steps: stdin closed, SIGTERM after 0.5 s, SIGKILL after 1 s more.
	noneLeft(t, marker, 10*time.Second)
	// The tab carries on.
	r, _ = p.Request(ctx, map[string]any{"type": "tools:servers", "id": "s"})
	mustOK(t, r)
}

// TestFaultStubbornServer: a server that ignores notifications/cancelled
// and SIGTERM and lingers after stdin closes. The page's cancel is answered
// at once and nothing more of that call reaches the page; on disconnect the
// bridge closes stdin, sends SIGTERM (ignored), then SIGKILL; the process
// is gone from /proc (not a zombie either) within the stop steps' bound.
func TestFaultStubbornServer(t *testing.T) {
	leakCheck(t)
	ctx := testCtx(t, 30*time.Second)
	j := journal(t)
	spec, marker := faultServer(t, "stubborn", bridgetest.Mode{IgnoreSIGTERM: true, LingerAfterEOF: true, Journal: j})
	h := newHarness(t, bridge.Options{}, spec) // stop steps: 0.5 s, then SIGTERM, 1 s, then SIGKILL
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	// The call ignores the cancel and goes on for 10 steps of 30 ms.
	p.Send(map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "tool": "slow",
		"arguments": map[string]any{"steps": 10, "intervalMs": 30, "tag": "stubborn", "ignoreCancel": true}})
	if _, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" }); err != nil {
		t.Fatal(err)
	}
	r := within(t, 5*time.Second, "the cancel's answer", func() *bridgetest.Msg {
		p.Send(map[string]any{"type": "tools:cancel", "id": 2})
		r, err := p.Reply(ctx, "tools:call", 2)
		if err != nil {
			t.Fatal(err)
		}
		return r
	})
	mustErr(t, r, bridge.CodeCancelled)
	seen := len(p.All())
	waitFor(t, 5*time.Second, "notifications/cancelled upstream", func() bool {
		return countOf(journalMethods(t, j), "notifications/cancelled") == 1
	})
	// Let the server finish the call it would not cancel; none of its
	// progress or its result reaches the page.
	time.Sleep(500 * time.Millisecond)
	for _, m := range p.All()[seen:] {
		if string(m.ID) == "2" && m.Type != "tools:cancel" { // the cancel's own reply may come after the call's
			t.Fatalf("a message of the cancelled call reached the page: %s", m)
		}
	}
	entries, err := bridgetest.ReadJournal(j)
	if err != nil || len(entries) == 0 || !entries[0].Start {
		t.Fatalf("journal: %v", err)
	}
	pid := entries[0].Pid
	start := time.Now()
	r, _ = p.Request(ctx, map[string]any{"type": "tools:disconnect", "id": 3, "server": spec.Name})
	mustOK(t, r)
	waitFor(t, 10*time.Second, "the stubborn server to be killed and reaped", func() bool { return !exists(pid) })
	if el := time.Since(start); el < 1400*time.Millisecond {
		t.Errorf("the server was gone after %s, before the SIGKILL step: it was not as stubborn as the test needs", el)
	}
	noneLeft(t, marker, 5*time.Second)
}

// exists reports whether /proc has pid at all (a zombie included).
func exists(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// TestFaultMalformedJSONRPC: a server that writes malformed JSON-RPC
// between its messages (cut lines, wrong types, responses to requests never
// made, requests without a method, a request the bridge never answers with
// anything but an error). Every call is still answered with its own
// result, and nothing of the junk reaches the page.
func TestFaultMalformedJSONRPC(t *testing.T) {
	leakCheck(t)
	ctx := testCtx(t, 30*time.Second)
	j := journal(t)
	junk := []string{
		`{"jsonrpc":"2.0","id":`,
		`{"jsonrpc":"2.0","id":{"a":1},"result":{"content":[{"type":"text","text":"junk object id"}]}}`,
		`{"jsonrpc":"2.0","id":987654321,"result":{"content":[{"type":"text","text":"junk unknown id"}]}}`,
		`{"jsonrpc":"2.0","id":"nobody","error":{"code":-1,"message":"junk error"}}`,
		`{"jsonrpc":"2.0","id":987654322,"error":"junk error string"}`,
		`{"jsonrpc":"2.0","method":null,"id":5}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"mjb-999999","progress":1,"message":"junk progress"}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":"junk"}`,
		`{"jsonrpc":"2.0","method":"roots/list","id":"junk-request"}`,
		`{"jsonrpc":"2.0","result":{"junk":true}}`,
		"\x00\x01\x02 junk",
		`{"jsonrpc":"2.0","id":987654323,"result":{"content":[]}} trailing junk`,
	}
	spec, marker := faultServer(t, "malformed", bridgetest.Mode{Banner: junk, JunkEveryN: 1, Journal: j})
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	for i := 0; i < 20; i++ {
		tag := fmt.Sprintf("call-%d", i)
		r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 10 + i, "server": spec.Name, "tool": "slow",
			"arguments": map[string]any{"steps": 2, "intervalMs": 1, "tag": tag}})
		if err != nil {
			t.Fatal(err)
		}
		mustOK(t, r)
		if !strings.Contains(string(r.Fields["result"]), `"tag":"`+tag+`"`) {
			t.Fatalf("call %d got another result: %s", i, r)
		}
	}
	for _, m := range p.All() {
		if strings.Contains(m.String(), "junk") {
			t.Fatalf("junk from the server reached the page: %s", m)
		}
	}
	checkJournal(t, j)
	p.Close()
	h.b.Close()
	noneLeft(t, marker, 10*time.Second)
}

// TestFaultStderrFlood: a server that writes 64 MB to stderr while it
// starts. The bridge's heap stays bounded (measured in this process: the
// bridge runs here), the page that waits is not flooded off its socket,
// and the start completes.
func TestFaultStderrFlood(t *testing.T) {
	leakCheck(t)
	ctx := testCtx(t, 120*time.Second)
	const flood = 64 << 20
	spec, marker := faultServer(t, "flood", bridgetest.Mode{StderrFlood: flood})
	h := newHarness(t, bridge.Options{}, spec)
	// A raw page that reads and counts, keeping nothing: the heap measured
	// is the bridge's.
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, h.wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	peak := base
	stopSample := make(chan struct{})
	sampled := make(chan uint64)
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		p := base
		for {
			select {
			case <-stopSample:
				sampled <- p
				return
			case <-tick.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				p = max(p, ms.HeapAlloc)
			}
		}
	}()
	msg, _ := json.Marshal(map[string]any{"type": "tools:connect", "id": 1, "server": spec.Name, "fingerprint": spec.Fingerprint, "confirmed": true})
	conn.WriteMessage(websocket.TextMessage, msg)
	progress := 0
	var reply map[string]any
	for reply == nil {
		_, data, err := conn.ReadMessage()
		if err != nil {
			close(stopSample)
			<-sampled
			t.Fatalf("the page lost its socket while the server flooded stderr (%d progress messages): %v", progress, err)
		}
		var m map[string]any
		json.Unmarshal(data, &m)
		switch m["type"] {
		case "tools:progress":
			progress++
		case "tools:connect":
			reply = m
		}
	}
	close(stopSample)
	peak = <-sampled
	if reply["ok"] != true {
		t.Fatalf("connect after the flood: %v", reply)
	}
	t.Logf("heap before %d KiB, peak %d KiB during a %d MiB stderr flood; %d progress messages", base>>10, peak>>10, flood>>20, progress)
	if peak > base+32<<20 {
		t.Errorf("the bridge's heap grew by %d MiB during a %d MiB stderr flood", (peak-base)>>20, flood>>20)
	}
	conn.Close()
	h.b.Close()
	noneLeft(t, marker, 10*time.Second)
}

// TestFaultHTTPRestartLosesSession: a Streamable HTTP server (the replay
// server, no Node needed) restarts and forgets the session. The call in
// flight and the next call fail with one line, the tab is told the session
// closed, and the next connect works.
func TestFaultHTTPRestartLosesSession(t *testing.T) {
	leakCheck(t)
	ctx := testCtx(t, 30*time.Second)
	replay, err := bridgetest.NewHTTPReplay(bridgetest.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(replay)
	tr := &http.Transport{}
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); tr.CloseIdleConnections() })
	spec := bridge.ServerSpec{Name: "replay", Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp", Source: "test", Fingerprint: "sha256:replay"}
	h := newHarness(t, bridge.Options{HTTPTransport: tr}, spec)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	r, _ := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": "replay", "tool": "echo", "arguments": map[string]any{"x": 1}})
	mustOK(t, r)
	p.Send(map[string]any{"type": "tools:call", "id": 3, "server": "replay", "tool": "slow", "arguments": map[string]any{"steps": 1000, "intervalMs": 20, "tag": "inflight"}})
	if _, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" && string(m.ID) == "3" }); err != nil {
		t.Fatal(err)
	}
	replay.Restart()
	r = within(t, 10*time.Second, "the answer of the call in flight", func() *bridgetest.Msg {
		r, err := p.Reply(ctx, "tools:call", 3)
		if err != nil {
			t.Fatal(err)
		}
		return r
	})
	if r.OK != nil && *r.OK {
		t.Fatalf("a call whose session was lost must fail: %s", r)
	}
	oneLineMsg(t, r)
	r, _ = p.Request(ctx, map[string]any{"type": "tools:call", "id": 4, "server": "replay", "tool": "echo", "arguments": map[string]any{}})
	if r.OK != nil && *r.OK {
		t.Fatalf("a call on a lost session must fail: %s", r)
	}
	oneLineMsg(t, r)
	if _, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:closed" }); err != nil {
		t.Fatalf("no tools:closed: %v", err)
	}
	connect(t, ctx, p, 5, spec)
	r, _ = p.Request(ctx, map[string]any{"type": "tools:call", "id": 6, "server": "replay", "tool": "echo", "arguments": map[string]any{"again": true}})
	mustOK(t, r)
}

// TestFaultSlowReader: a tab that stops reading while a call streams
// progress. Its progress is replaced in place in its queue, which never
// fills; the bridge's write to it stalls once the socket's buffers are
// full, and after WriteTimeout the tab is cut (in the middle of a frame, so
// without a close frame, which the page sees when it reads again), its
// call is cancelled on the server, and another tab on the same session
// carries on.
func TestFaultSlowReader(t *testing.T) {
	leakCheck(t)
	ctx := testCtx(t, 3*time.Minute) // bounds, not speeds: a busy machine is slow to fill a socket
	j := journal(t)
	spec, marker := faultServer(t, "chatty", bridgetest.Mode{Journal: j})
	// Unpaced progress fills the stuck tab's socket buffers in seconds
	// (paced, its twenty small messages a second would take hours, and the
	// pong timeout would end the tab first).
	h := newHarness(t, bridge.Options{WriteTimeout: 2 * time.Second, ProgressInterval: -1}, spec)
	good := h.page(ctx)
	connect(t, ctx, good, 1, spec)

	// The stuck tab: a raw socket that reads only its connect reply, then
	// stops reading.
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, h.wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	send := func(v any) {
		b, _ := json.Marshal(v)
		if err := conn.WriteMessage(websocket.TextMessage, b); err != nil {
			t.Fatal(err)
		}
	}
	send(map[string]any{"type": "tools:connect", "id": 1, "server": spec.Name, "fingerprint": spec.Fingerprint, "confirmed": true})
	if _, data, err := conn.ReadMessage(); err != nil || !bytes.Contains(data, []byte(`"ok":true`)) {
		t.Fatalf("stuck tab's connect: %v %s", err, data)
	}
	send(map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "tool": "slow",
		"arguments": map[string]any{"steps": 10_000_000, "intervalMs": 0, "tag": "flood"}})

	waitFor(t, 2*time.Minute, "the stuck tab's call to be cancelled upstream", func() bool {
		return countOf(journalMethods(t, j), "notifications/cancelled") >= 1
	})
	// The other tab carries on, on the same session.
	r, err := good.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "tool": "slow",
		"arguments": map[string]any{"steps": 3, "intervalMs": 1, "tag": "good"}})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	// The stuck page reads again: what was on the wire, then the cut (or,
	// had the write stalled between frames, a 4408 close frame).
	conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	frames := 0
	for {
		_, _, err := conn.ReadMessage()
		if err == nil {
			frames++
			continue
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) && ce.Code != websocket.CloseAbnormalClosure && (ce.Code != bridge.CloseSlowReader || ce.Text == "") {
			t.Fatalf("want a cut or close 4408 with a reason after %d frames, got %v", frames, err)
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("the stuck tab was neither cut nor closed after %d frames", frames)
		}
		t.Logf("the stuck tab read %d frames, then %v", frames, err)
		break
	}
	good.Close()
	h.b.Close()
	noneLeft(t, marker, 10*time.Second)
}
