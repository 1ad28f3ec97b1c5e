package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// replayServer serves an HTTPReplay with opts (wrapped by wrap, if not
// nil) and returns its spec and the replay.
func replayServer(t *testing.T, name string, opts bridgetest.HTTPOptions, wrap func(http.Handler) http.Handler) (bridge.ServerSpec, *bridgetest.HTTPReplay, *httptest.Server) {
	t.Helper()
	replay, err := bridgetest.NewHTTPReplay(opts)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = replay
	if wrap != nil {
		h = wrap(replay)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return bridge.ServerSpec{Name: name, Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp", Source: "test",
		Fingerprint: "sha256:" + name}, replay, srv
}

// callAndCancel starts a long call of slow on p, waits for its progress,
// cancels it from the page and checks it is answered cancelled.
func callAndCancel(t *testing.T, ctx context.Context, p *bridgetest.Page, server string, id any) {
	t.Helper()
	if err := p.Send(map[string]any{"type": "tools:call", "id": id, "server": server, "tool": "slow", "arguments": map[string]any{"steps": 1000, "intervalMs": 50}}); err != nil {
		t.Fatal(err)
	}
	want := strconv.Quote(id.(string))
	if _, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" && string(m.ID) == want }); err != nil {
		t.Fatal(err)
	}
	if err := p.Send(map[string]any{"type": "tools:cancel", "id": id}); err != nil {
		t.Fatal(err)
	}
	r, err := p.Reply(ctx, "tools:call", id)
	if err != nil {
		t.Fatal(err)
	}
	mustErr(t, r, bridge.CodeCancelled)
}

// TestRefusedNotificationKeepsSession: mcp 2.0.0 answers 400 to every
// POSTed notification. A server of 2025-11-25 that does the same (so
// notifications/initialized and notifications/cancelled are refused) and
// one of 2026-07-28 (mcp 2.0.0 itself): a call is cancelled, the server
// stops it, and the same session serves the next call; the page is never
// told the session closed. At 2026-07-28 nothing but requests is POSTed.
func TestRefusedNotificationKeepsSession(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts bridgetest.HTTPOptions
	}{
		{"2025-11-25-stateful", bridgetest.HTTPOptions{RefuseNotifications: true}},
		{"2025-11-25-stateless", bridgetest.HTTPOptions{RefuseNotifications: true, Stateless: true}},
		{"python-mcp-2.0.0", bridgetest.PythonMCP2()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			spec, replay, _ := replayServer(t, "refusing", tc.opts, nil)
			h := newHarness(t, bridge.Options{}, spec)
			p := h.page(ctx)
			connect(t, ctx, p, 1, spec)
			callAndCancel(t, ctx, p, spec.Name, "c")
			waitFor(t, 10*time.Second, "the server to stop the cancelled call", func() bool { return replay.Cancelled() == 1 })
			r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 3, "server": spec.Name, "tool": "echo", "arguments": map[string]any{"after": true}})
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, r)
			for _, m := range p.All() {
				if m.Type == "tools:closed" {
					t.Errorf("the page was told the session closed: %s", m)
				}
			}
			if !tc.opts.Modern {
				// The server may stop the call when the bridge closes its
				// response stream, before the POSTed notification arrives.
				waitFor(t, 10*time.Second, "notifications/cancelled to reach the server", func() bool {
					return slices.Contains(replay.Methods(), "notifications/cancelled")
				})
			}
			refused := 0
			for _, rq := range replay.Requests() {
				if rq.Status == http.StatusBadRequest {
					refused++
				}
				if tc.opts.Modern && rq.HTTPMethod == http.MethodPost && rq.RPCMethod != "" && !slices.Contains([]string{"server/discover", "tools/list", "tools/call", "ping"}, rq.RPCMethod) {
					t.Errorf("POSTed to a server of 2026-07-28: %s (only requests may be)", rq.RPCMethod)
				}
			}
			if !tc.opts.Modern && refused < 2 {
				t.Errorf("%d refused notifications, want notifications/initialized and notifications/cancelled refused: %v", refused, replay.Methods())
			}
			if tc.opts.Modern && refused != 0 {
				t.Errorf("%d notifications POSTed to a server of 2026-07-28: %v", refused, replay.Methods())
			}
		})
	}
}

// TestFailedPostKeepsSession: a request refused with a plain 400 (not a
// JSON-RPC answer) fails that call alone, with the server's words; the
// session serves the next call.
func TestFailedPostKeepsSession(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	spec, _, _ := replayServer(t, "picky", bridgetest.HTTPOptions{}, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"refuse-me"`)) {
				http.Error(w, "Bad Request: this gateway refuses that", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
		})
	})
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	r, _ := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "tool": "echo", "arguments": map[string]any{"tag": "refuse-me"}})
	mustErr(t, r, bridge.CodeServerFailed)
	if !strings.Contains(r.Error.Message, "this gateway refuses that") {
		t.Errorf("the refusal does not quote the server: %q", r.Error.Message)
	}
	r, _ = p.Request(ctx, map[string]any{"type": "tools:call", "id": 3, "server": spec.Name, "tool": "echo", "arguments": map[string]any{"tag": "fine"}})
	mustOK(t, r)
}

// TestErrorAnswerKeepsSession: a JSON-RPC error answering one call fails
// that call; the session serves the next.
func TestErrorAnswerKeepsSession(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	spec := fakeServer(t, "failing", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	r, _ := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "tool": "fail", "arguments": map[string]any{"message": "nope"}})
	mustErr(t, r, bridge.CodeServerFailed)
	r, _ = p.Request(ctx, map[string]any{"type": "tools:call", "id": 3, "server": spec.Name, "tool": "echo"})
	mustOK(t, r)
}

// endedForBoth checks that both pages got tools:closed for server before
// any answer to their calls in flight, and that a later call names why.
func endedForBoth(t *testing.T, ctx context.Context, server string, pages []*bridgetest.Page, callID string, why string) {
	t.Helper()
	for i, p := range pages {
		closed, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:closed" && m.Str("server") == server })
		if err != nil {
			t.Fatalf("tab %d: no tools:closed: %v", i, err)
		}
		if !strings.Contains(closed.Str("message"), why) {
			t.Errorf("tab %d: tools:closed says %q, want it to say %q", i, closed.Str("message"), why)
		}
		if i == 0 {
			// Its call in flight is answered after tools:closed.
			r, err := p.Reply(ctx, "tools:call", callID)
			if err != nil {
				t.Fatal(err)
			}
			mustErr(t, r, bridge.CodeServerFailed)
			order := slices.IndexFunc(p.All(), func(m *bridgetest.Msg) bool { return m == closed })
			if at := slices.IndexFunc(p.All(), func(m *bridgetest.Msg) bool { return m == r }); at < order {
				t.Errorf("tab %d: the call's answer came before tools:closed", i)
			}
		}
		r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": "later", "server": server, "tool": "echo"})
		if err != nil {
			t.Fatal(err)
		}
		mustErr(t, r, bridge.CodeNotConnected)
		if !strings.Contains(r.Error.Message, why) {
			t.Errorf("tab %d: a later call says %q, want it to name why the session ended (%q)", i, r.Error.Message, why)
		}
	}
}

// TestSessionEnds: each way a session ends (PROTOCOL.md, "When a session
// ends"): every tab holding it gets tools:closed with the reason before
// the answer to its call in flight, and a later call names the reason.
func TestSessionEnds(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// start returns the spec and what makes the server go while a
		// call of slow is in flight; why is a word the reason must hold.
		start func(t *testing.T) (spec bridge.ServerSpec, end func(), why string)
	}{
		{"process exited", func(t *testing.T) (bridge.ServerSpec, func(), string) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			spec := fakeServer(t, "exits", bridgetest.Mode{PidFile: pidFile})
			return spec, func() { killPid(readPid(t, pidFile)) }, "SIGKILL"
		}},
		{"transport closed", func(t *testing.T) (bridge.ServerSpec, func(), string) {
			// The server breaks its event stream (an event that is not
			// JSON-RPC): go-sdk closes the connection.
			var garble atomic.Bool
			spec, _, _ := replayServer(t, "garbles", bridgetest.HTTPOptions{}, func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					next.ServeHTTP(&garbler{ResponseWriter: w, on: &garble}, r)
				})
			})
			return spec, func() { garble.Store(true) }, "decode"
		}},
		{"wrapper closed stdout, lives on: stopped answering pings", func(t *testing.T) (bridge.ServerSpec, func(), string) {
			// A wrapper that outlives the server and closes the stdout
			// they shared, but not its process: over stdio the
			// connection ends with the process, so the pings end it.
			pidFile := filepath.Join(t.TempDir(), "pid")
			spec := fakeServer(t, "closes", bridgetest.Mode{PidFile: pidFile})
			spec.Args = []string{"-c", `"$0" -test.run='^$'; exec >&-; sleep 60`, spec.Command}
			spec.Command = "/bin/sh"
			return spec, func() { killPid(readPid(t, pidFile)) }, "stopped answering"
		}},
		{"stateful HTTP session answered 404", func(t *testing.T) (bridge.ServerSpec, func(), string) {
			spec, replay, _ := replayServer(t, "forgets", bridgetest.HTTPOptions{}, nil)
			return spec, replay.Restart, "session not found"
		}},
		{"stopped answering pings", func(t *testing.T) (bridge.ServerSpec, func(), string) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			spec := fakeServer(t, "silent", bridgetest.Mode{PidFile: pidFile})
			spec.Args = []string{"-c", `"$0" -test.run='^$'; sleep 60`, spec.Command}
			spec.Command = "/bin/sh"
			return spec, func() { killPid(readPid(t, pidFile)) }, "stopped answering"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = exe
			ctx := testCtx(t, 30*time.Second)
			spec, end, why := tc.start(t)
			h := newHarness(t, bridge.Options{LivenessInterval: time.Second, LivenessTimeout: 500 * time.Millisecond, IdleGrace: 5 * time.Second}, spec)
			a, b := h.page(ctx), h.page(ctx)
			connect(t, ctx, a, 1, spec)
			connect(t, ctx, b, 1, spec)
			if err := a.Send(map[string]any{"type": "tools:call", "id": "inflight", "server": spec.Name, "tool": "slow", "arguments": map[string]any{"steps": 1000, "intervalMs": 20}}); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" }); err != nil {
				t.Fatal(err)
			}
			end()
			endedForBoth(t, ctx, spec.Name, []*bridgetest.Page{a, b}, "inflight", why)
			connect(t, ctx, b, 2, spec)
			r, _ := b.Request(ctx, map[string]any{"type": "tools:call", "id": 3, "server": spec.Name, "tool": "echo"})
			mustOK(t, r)
		})
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, 10*time.Second, "the pid file "+path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// garbler writes one event that is not JSON-RPC in place of the next
// write once on is set, and clears on.
type garbler struct {
	http.ResponseWriter
	on *atomic.Bool
}

func (g *garbler) Write(b []byte) (int, error) {
	if g.on.CompareAndSwap(true, false) {
		if _, err := io.WriteString(g.ResponseWriter, "event: message\ndata: {not json\n\n"); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return g.ResponseWriter.Write(b)
}

func (g *garbler) Flush() { g.ResponseWriter.(http.Flusher).Flush() }

// TestLivenessWrapper: a server started through a wrapper that does not
// exec (a shell script) dies while the shell keeps the pipes open. With a
// call in flight, the session ends within the liveness bound
// (LivenessInterval + LivenessTimeout after the server's last word), the
// wrapper's process group is stopped, and the tab is told. Then, with no
// call in flight, a tab connecting to such a session gets a fresh one:
// the connect pings the silent server first.
func TestLivenessWrapper(t *testing.T) {
	const interval, timeout = 2 * time.Second, time.Second
	bound := interval + timeout
	dir := t.TempDir()
	pidFile, shPidFile := filepath.Join(dir, "pid"), filepath.Join(dir, "sh-pid")
	spec := fakeServer(t, "wrapped", bridgetest.Mode{PidFile: pidFile})
	spec.Args = []string{"-c", `echo $$ > "$1"; "$0" -test.run='^$'; sleep 60`, spec.Command, shPidFile}
	spec.Command = "/bin/sh"
	h := newHarness(t, bridge.Options{LivenessInterval: interval, LivenessTimeout: timeout}, spec)
	ctx := testCtx(t, 60*time.Second)

	t.Run("call in flight", func(t *testing.T) {
		p := h.page(ctx)
		connect(t, ctx, p, 1, spec)
		sh := readPid(t, shPidFile)
		if err := p.Send(map[string]any{"type": "tools:call", "id": "inflight", "server": spec.Name, "tool": "slow", "arguments": map[string]any{"steps": 1000, "intervalMs": 20}}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" }); err != nil {
			t.Fatal(err)
		}
		pid := readPid(t, pidFile)
		os.Remove(pidFile) // the next start writes its own
		if err := killPid(pid); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		closed, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:closed" })
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(killed)
		t.Logf("the session ended %s after the server died under its wrapper (bound %s): %s", took.Round(time.Millisecond), bound, closed.Str("message"))
		if took > bound+500*time.Millisecond {
			t.Errorf("the session ended %s after the server died, beyond the bound of %s", took, bound)
		}
		r, err := p.Reply(ctx, "tools:call", "inflight")
		if err != nil {
			t.Fatal(err)
		}
		mustErr(t, r, bridge.CodeServerFailed)
		waitFor(t, 5*time.Second, "the wrapper's process group to be stopped", func() bool { return !exists(sh) })
	})

	t.Run("connect pings first", func(t *testing.T) {
		a := h.page(ctx)
		connect(t, ctx, a, 1, spec)
		r, _ := a.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "tool": "echo"})
		mustOK(t, r)
		pid := readPid(t, pidFile)
		os.Remove(pidFile)
		if err := killPid(pid); err != nil {
			t.Fatal(err)
		}
		time.Sleep(interval) // silent for an interval: a connect pings it
		b := h.page(ctx)
		began := time.Now()
		connect(t, ctx, b, 1, spec)
		t.Logf("a connect to the dead session got a fresh one in %s", time.Since(began).Round(time.Millisecond))
		if _, err := a.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:closed" }); err != nil {
			t.Fatalf("the tab holding the dead session was not told: %v", err)
		}
		r, _ = b.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "tool": "echo"})
		mustOK(t, r)
	})
}

// TestStartStderrBlock: a server that writes a long warning wrapped at 80
// columns (mcp 1.29.0's) while it starts. The start's progress and its
// failure quote the last few stderr lines as a block (a bounded list,
// control characters removed), not the last line alone.
func TestStartStderrBlock(t *testing.T) {
	check := func(t *testing.T, what string, block []string, last string) {
		t.Helper()
		if len(block) < 2 || len(block) > 5 {
			t.Fatalf("%s: %d stderr lines, want 2 to 5: %q", what, len(block), block)
		}
		total := 0
		for _, l := range block {
			total += len(l)
			if strings.ContainsFunc(l, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				t.Errorf("%s: a control character in %q", what, l)
			}
		}
		if total > 1024 {
			t.Errorf("%s: %d bytes of stderr, want at most 1024", what, total)
		}
		if block[len(block)-1] != last {
			t.Errorf("%s: the block ends with %q, want %q", what, block[len(block)-1], last)
		}
	}
	warning := append(bridgetest.PythonWarning(), "\x1b[31mERROR\x1b[0m\tcannot load the model")
	t.Run("failure", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		spec := fakeServer(t, "fails", bridgetest.Mode{Stderr: warning, ExitBeforeInit: true})
		h := newHarness(t, bridge.Options{}, spec)
		p := h.page(ctx)
		r, err := p.Request(ctx, map[string]any{"type": "tools:connect", "id": 1, "server": spec.Name, "fingerprint": spec.Fingerprint, "confirmed": true})
		if err != nil {
			t.Fatal(err)
		}
		mustErr(t, r, bridge.CodeServerFailed)
		var e struct{ Stderr []string }
		json.Unmarshal(r.Fields["error"], &e)
		check(t, "the failure", e.Stderr, "bridgetest: fatal: simulated failure before initialize")
		if !slices.Contains(e.Stderr, "ERROR cannot load the model") {
			t.Errorf("the coloured line is not quoted without its escapes: %q", e.Stderr)
		}
	})
	t.Run("progress", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		spec := fakeServer(t, "hangs", bridgetest.Mode{Stderr: warning, HangInit: true})
		h := newHarness(t, bridge.Options{InitTimeout: 2 * time.Second, DiscoverTimeout: 500 * time.Millisecond}, spec)
		p := h.page(ctx)
		r, err := p.Request(ctx, map[string]any{"type": "tools:connect", "id": 1, "server": spec.Name, "fingerprint": spec.Fingerprint, "confirmed": true})
		if err != nil {
			t.Fatal(err)
		}
		mustErr(t, r, bridge.CodeServerFailed)
		var last *bridgetest.Msg
		for _, m := range p.All() {
			if m.Type == "tools:progress" {
				last = m
			}
		}
		if last == nil {
			t.Fatal("no tools:progress while the server started")
		}
		var block []string
		json.Unmarshal(last.Fields["stderr"], &block)
		check(t, "the progress", block, "ERROR cannot load the model")
	})
}

// killPid kills process pid: SIGKILL, or TerminateProcess on Windows.
func killPid(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
