package bridge_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// interopCall is one tools/call of a reference server.
type interopCall struct {
	tool string
	args map[string]any
}

// interopServer is a row of the interop matrix: a server, how to start a
// fresh copy of it over stdio (command, arguments, environment; state
// names a file or directory private to that copy) and the calls to make.
type interopServer struct {
	name string
	// stdio returns a fresh copy's command line and environment.
	stdio func(t *testing.T, state string) (cmd string, args []string, env map[string]string)
	// http serves a fresh copy over Streamable HTTP and returns its URL.
	http   func(t *testing.T, state string) string
	modern bool // speaks 2026-07-28 only
	calls  []interopCall
	// long reports progress (one notification per step) and runs for
	// seconds; the page must get the progress and be able to cancel it.
	// nil when the server has no such tool: noLong says why.
	long   func(steps int) interopCall
	noLong string
}

// TestReferenceServersByteExact is the interop matrix: npm's reference
// servers server-everything, server-filesystem and server-memory, and a
// server that speaks only 2026-07-28 (go-sdk's, NewModernTestServer), each
// over stdio and over Streamable HTTP (server-everything's own, supergateway
// 4.0.0 in front of the two that speak only stdio, go-sdk's handler for the
// modern one). For each: the listing and every result reach the page byte
// for byte as a plain JSON-RPC client receives them from a fresh copy of
// the server over stdio (tool errors included), and where the server has a
// tool that reports progress and runs long, the page gets its progress and
// can cancel it, after which the session still answers.
func TestReferenceServersByteExact(t *testing.T) {
	dir := t.TempDir()
	files := filepath.Join(dir, "files")
	if err := os.MkdirAll(filepath.Join(files, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(files, "a.txt"), []byte("hello <&> \u2028 world\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	entities := map[string]any{"entities": []any{
		map[string]any{"name": "water", "entityType": "molecule", "observations": []any{"H2O", "bent, 104.5°"}},
		map[string]any{"name": "argon", "entityType": "atom", "observations": []any{"noble gas"}},
	}}
	npm := func(pkg string, args func(state string) []string, env func(state string) map[string]string) func(*testing.T, string) (string, []string, map[string]string) {
		return func(t *testing.T, state string) (string, []string, map[string]string) {
			node, js := npmServer(t, pkg)
			return node, append([]string{js}, args(state)...), env(state)
		}
	}
	none := func(string) map[string]string { return nil }
	behindSupergateway := func(stdio func(*testing.T, string) (string, []string, map[string]string)) func(*testing.T, string) string {
		return func(t *testing.T, state string) string {
			cmd, args, env := stdio(t, state)
			return startSupergateway(t, cmd, args, env)
		}
	}
	modernJournal := filepath.Join(dir, "modern-journal.jsonl")
	httpModern := &modernHTTP{}

	servers := []interopServer{
		{name: "server-everything",
			stdio: npm("server-everything", func(string) []string { return []string{"stdio"} }, none),
			http:  func(t *testing.T, _ string) string { url, _ := startEverythingHTTP(t); return url },
			calls: []interopCall{
				{"echo", map[string]any{"message": "hi <&> \u2028 there"}},
				{"get-sum", map[string]any{"a": 2.5, "b": 40}},
				{"get-tiny-image", map[string]any{}},
				{"get-annotated-message", map[string]any{"messageType": "error", "includeImage": false}},
				{"get-sum", map[string]any{"a": "two"}}, // invalid arguments: a tool error
			},
			long: func(steps int) interopCall {
				return interopCall{"trigger-long-running-operation", map[string]any{"duration": steps / 2, "steps": steps}}
			}},
		{name: "server-filesystem",
			stdio: npm("server-filesystem", func(string) []string { return []string{files} }, none),
			calls: []interopCall{
				{"list_allowed_directories", map[string]any{}},
				{"list_directory", map[string]any{"path": files}},
				{"read_text_file", map[string]any{"path": filepath.Join(files, "a.txt")}},
				{"read_text_file", map[string]any{"path": "/etc/passwd"}}, // outside: a tool error
			},
			noLong: "no server-filesystem tool reports progress, and every one answers at once"},
		{name: "server-memory",
			stdio: npm("server-memory", func(string) []string { return nil },
				func(state string) map[string]string { return map[string]string{"MEMORY_FILE_PATH": state + ".jsonl"} }),
			calls: []interopCall{
				{"create_entities", entities},
				{"read_graph", map[string]any{}},
				{"search_nodes", map[string]any{"query": "noble"}},
			},
			noLong: "no server-memory tool reports progress, and every one answers at once"},
		{name: "modern-2026-07-28", modern: true,
			stdio: func(t *testing.T, state string) (string, []string, map[string]string) {
				exe, err := os.Executable()
				if err != nil {
					t.Fatal(err)
				}
				mode, _ := json.Marshal(bridge.ModernServerMode{Journal: modernJournal})
				return exe, []string{"-test.run=^$"}, map[string]string{bridge.ModernServerEnv: string(mode)}
			},
			http: httpModern.start,
			calls: []interopCall{
				{"hello", map[string]any{"name": "lab <&> \u2028"}},
				{"no-such-tool", map[string]any{}}, // a JSON-RPC error: answered as a tool error
			},
			long: func(steps int) interopCall {
				return interopCall{"slow", map[string]any{"steps": steps, "intervalMs": 250}}
			}},
	}
	for i := range servers {
		if s := &servers[i]; s.http == nil {
			s.http = behindSupergateway(s.stdio)
		}
	}

	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			// The baseline, from a fresh copy over stdio. A call of a tool
			// the server does not have is refused by the bridge (it is
			// not listed), so it is left out of the baseline for both.
			cmd, args, env := srv.stdio(t, filepath.Join(dir, srv.name+"-direct"))
			var calls []interopCall
			for _, c := range srv.calls {
				if c.tool != "no-such-tool" {
					calls = append(calls, c)
				}
			}
			listing, direct := rawStdioCalls(t, cmd, args, env, srv.modern, calls)

			for _, transport := range []string{bridge.TransportStdio, bridge.TransportHTTP} {
				t.Run(transport, func(t *testing.T) {
					state := filepath.Join(dir, srv.name+"-"+transport)
					spec := bridge.ServerSpec{Name: srv.name, Transport: transport, Source: "test",
						Fingerprint: "sha256:" + srv.name + "-" + transport}
					if transport == bridge.TransportStdio {
						spec.Command, spec.Args, spec.Env = srv.stdio(t, state)
					} else {
						spec.URL = srv.http(t, state)
					}
					ctx := testCtx(t, 90*time.Second)
					h := newHarness(t, bridge.Options{}, spec)
					p := h.page(ctx)
					c := connect(t, ctx, p, "connect", spec)
					if want := map[bool]string{true: "2026-07-28", false: "2025-11-25"}[srv.modern]; c.Str("protocolVersion") != want {
						t.Errorf("protocolVersion %q, want %q", c.Str("protocolVersion"), want)
					}
					if got := c.Fields["tools"]; !bytes.Equal(got, listing) {
						t.Errorf("the page's listing\n%s\nthe server's\n%s", got, listing)
					}
					k := 0
					for i, call := range srv.calls {
						r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 10 + i, "server": spec.Name, "tool": call.tool, "arguments": call.args})
						if err != nil {
							t.Fatalf("%s: %v", call.tool, err)
						}
						if call.tool == "no-such-tool" {
							mustErr(t, r, bridge.CodeUnknownTool)
							continue
						}
						mustOK(t, r)
						if got := r.Fields["result"]; !bytes.Equal(got, direct[k]) {
							t.Errorf("%s: the page got\n%s\nthe server wrote\n%s", call.tool, got, direct[k])
						}
						k++
					}
					if srv.long == nil {
						t.Logf("progress and cancel not tried: %s", srv.noLong)
						return
					}
					interopProgressAndCancel(t, ctx, p, spec, srv, transport, modernJournal, httpModern)
				})
			}
		})
	}
}

// interopProgressAndCancel: a long call reports progress to the page and
// completes; a second one is cancelled from the page, answered cancelled,
// and (for the modern server, whose journal says so) ends on the server;
// the session still answers afterwards.
func interopProgressAndCancel(t *testing.T, ctx context.Context, p *bridgetest.Page, spec bridge.ServerSpec, srv interopServer, transport, modernJournal string, httpModern *modernHTTP) {
	t.Helper()
	long := srv.long(4)
	r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": "long", "server": spec.Name, "tool": long.tool, "arguments": long.args})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	progress := 0
	for _, m := range p.All() {
		if m.Type == "tools:progress" && string(m.ID) == `"long"` {
			progress++
		}
	}
	if progress < 3 {
		t.Errorf("%s: %d tools:progress for 4 steps, want at least 3", long.tool, progress)
	}

	long = srv.long(40)
	if err := p.Send(map[string]any{"type": "tools:call", "id": "cancel-me", "server": spec.Name, "tool": long.tool, "arguments": long.args}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" && string(m.ID) == `"cancel-me"` }); err != nil {
		t.Fatal(err)
	}
	if err := p.Send(map[string]any{"type": "tools:cancel", "id": "cancel-me"}); err != nil {
		t.Fatal(err)
	}
	r, err = p.Reply(ctx, "tools:call", "cancel-me")
	if err != nil {
		t.Fatal(err)
	}
	mustErr(t, r, bridge.CodeCancelled)
	if srv.modern {
		// Over stdio notifications/cancelled ends the call, over HTTP the
		// closed response stream does (revision 2026-07-28).
		count := func() int {
			if transport == bridge.TransportHTTP {
				return httpModern.count("cancelled:slow")
			}
			return countJournal(modernJournal, "cancelled:slow")
		}
		waitFor(t, 20*time.Second, "the modern server to see its call cancelled", func() bool { return count() >= 1 })
		if transport == bridge.TransportStdio {
			// go-sdk's server cancels the call's context as the notification
			// arrives and records the notification on another goroutine: the
			// journal may show the call's end first.
			waitFor(t, 10*time.Second, "the modern server's journal to show notifications/cancelled over stdio", func() bool {
				return countJournal(modernJournal, "notifications/cancelled") > 0
			})
		}
	}
	first := srv.calls[0]
	r, err = p.Request(ctx, map[string]any{"type": "tools:call", "id": "after", "server": spec.Name, "tool": first.tool, "arguments": first.args})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
}

// countJournal counts the modern server's journal lines for method.
func countJournal(path, method string) int {
	b, _ := os.ReadFile(path)
	n := 0
	for _, line := range bytes.Split(b, []byte("\n")) {
		var e struct{ Method string }
		if json.Unmarshal(line, &e) == nil && e.Method == method {
			n++
		}
	}
	return n
}

// modernHTTP serves NewModernTestServer over go-sdk's stateless Streamable
// HTTP handler (go-sdk's stateful handler cannot serve 2026-07-28) and
// records what it received.
type modernHTTP struct {
	mu   sync.Mutex
	seen []string
}

func (m *modernHTTP) record(method string, _ any) {
	m.mu.Lock()
	m.seen = append(m.seen, method)
	m.mu.Unlock()
}

func (m *modernHTTP) count(method string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.seen {
		if s == method {
			n++
		}
	}
	return n
}

func (m *modernHTTP) start(t *testing.T, _ string) string {
	server := bridge.NewModernTestServer(m.record)
	// Revision 2026-07-28: a server MUST treat the client's closing a
	// call's response stream as its cancellation; go-sdk's handler does so
	// only when asked.
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// startSupergateway serves a stdio server over Streamable HTTP through
// supergateway 4.0.0 (stateful: the sessions of 2025-11-25) and returns
// its URL; its process group is killed at cleanup.
func startSupergateway(t *testing.T, command string, args []string, env map[string]string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	js := filepath.Join(filepath.Dir(file), "..", ".ci", "node", "node_modules", "supergateway", "dist", "index.js")
	if _, err := os.Stat(js); err != nil {
		needComponent(t, "supergateway", "npm ci --prefix .ci/node")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		needComponent(t, "node", "the machine's Node.js")
	}
	line := strconv.Quote(command)
	for _, a := range args {
		line += " " + strconv.Quote(a)
	}
	port := bridgetest.FreePort(t)
	cmd := exec.Command(node, js, "--stdio", line, "--outputTransport", "streamableHttp", "--stateful",
		"--port", strconv.Itoa(port), "--logLevel", "none")
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	child.InGroup(cmd)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		child.KillGroup(cmd.Process)
		<-exited
	})
	giveUp := time.After(60 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
		}
		select {
		case err := <-exited:
			t.Fatalf("supergateway ended before listening: %v\n%s", err, stderr.String())
		case <-giveUp:
			t.Fatalf("supergateway did not listen on port %d within 60 s:\n%s", port, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// npmServer is node and the entry point of an npm reference server
// installed into .ci/node by .ci/run.
func npmServer(t testing.TB, pkg string) (node, js string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	js = filepath.Join(filepath.Dir(file), "..", ".ci", "node", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	node, err := exec.LookPath("node")
	if err != nil {
		needComponent(t, "node", "the machine's Node.js")
	}
	if _, err := os.Stat(js); err != nil {
		needComponent(t, "@modelcontextprotocol/"+pkg, "npm ci --prefix .ci/node")
	}
	return node, js
}

// rawStdioCalls starts a stdio server and talks to it as a plain JSON-RPC
// client with no capabilities: revision 2025-11-25 (initialize first), or
// for a modern server 2026-07-28 (every request carries its _meta). It
// returns the raw "tools" array of tools/list and the raw "result" of each
// call, as the server wrote them.
func rawStdioCalls(t *testing.T, command string, args []string, env map[string]string, modern bool, calls []interopCall) (json.RawMessage, []json.RawMessage) {
	t.Helper()
	cmd := exec.Command(command, args...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	child.InGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		child.KillGroup(cmd.Process)
		cmd.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "direct", "version": "1"}}
	send := func(id any, method string, params map[string]any) {
		msg := map[string]any{"jsonrpc": "2.0", "method": method}
		if id != nil {
			msg["id"] = id
		}
		if modern {
			if params == nil {
				params = map[string]any{}
			}
			params["_meta"] = meta
		}
		if params != nil {
			msg["params"] = params
		}
		b, _ := json.Marshal(msg)
		if _, err := stdin.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	await := func(id int) json.RawMessage {
		for sc.Scan() {
			var m struct {
				ID     *int            `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil || *m.ID != id {
				continue
			}
			if m.Error != nil {
				t.Fatalf("request %d: %s", id, m.Error)
			}
			return append(json.RawMessage(nil), m.Result...)
		}
		t.Fatalf("the server ended before answering %d: %v", id, sc.Err())
		return nil
	}
	if !modern {
		send(0, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "direct", "version": "1"}})
		await(0)
		send(nil, "notifications/initialized", nil)
	}
	send(1, "tools/list", nil)
	var list struct {
		Tools      json.RawMessage `json:"tools"`
		NextCursor string          `json:"nextCursor"`
	}
	if err := json.Unmarshal(await(1), &list); err != nil || list.NextCursor != "" {
		t.Fatalf("tools/list: %v (a second page is not expected of these servers)", err)
	}
	out := make([]json.RawMessage, len(calls))
	for i, c := range calls {
		send(i+2, "tools/call", map[string]any{"name": c.tool, "arguments": c.args})
		out[i] = await(i + 2)
	}
	return list.Tools, out
}

// TestPythonSDKInterop is the interop matrix's rows for the official
// Python MCP SDK, which cannot run here (field notes): servers of the
// fake-server kit that behave as its releases do, mcp 1.29.0
// (bridgetest.PythonMCP1Mode, PythonMCP1) and mcp 2.0.0 (PythonMCP2Mode,
// PythonMCP2), over stdio, Streamable HTTP stateful and stateless. For
// each: connect, a call with progress, a call cancelled from the page
// (the server stops it), another call on the same session, then the
// server killed and the page reconnected. mcp 2.0.0 speaks 2026-07-28
// only, which has no sessions: it has no stateful row.
func TestPythonSDKInterop(t *testing.T) {
	type row struct {
		server, transport string
		modern            bool
		// start returns the spec, the count of calls the server saw
		// cancelled and stopped, the kill, and (HTTP stateless) the
		// restart that brings a server back at the same address.
		start func(t *testing.T) (spec bridge.ServerSpec, cancelled func() int, kill func(), back func())
	}
	stdioRow := func(name string, mode bridgetest.Mode) func(t *testing.T) (bridge.ServerSpec, func() int, func(), func()) {
		return func(t *testing.T) (bridge.ServerSpec, func() int, func(), func()) {
			dir := t.TempDir()
			mode.Journal = filepath.Join(dir, "journal")
			mode.PidFile = filepath.Join(dir, "pid")
			spec := fakeServer(t, name, mode)
			cancelled := func() int {
				entries, _ := bridgetest.ReadJournal(mode.Journal)
				n := 0
				for _, e := range entries {
					if e.Method == "notifications/cancelled" && e.Matched != nil && *e.Matched {
						n++
					}
				}
				return n
			}
			kill := func() {
				pid := readPid(t, mode.PidFile)
				os.Remove(mode.PidFile)
				proc, err := os.FindProcess(pid)
				if err == nil {
					err = proc.Kill() // SIGKILL; TerminateProcess on Windows
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			return spec, cancelled, kill, func() {}
		}
	}
	httpRow := func(opts bridgetest.HTTPOptions) func(t *testing.T) (bridge.ServerSpec, func() int, func(), func()) {
		return func(t *testing.T) (bridge.ServerSpec, func() int, func(), func()) {
			replay, err := bridgetest.NewHTTPReplay(opts)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(replay)
			addr := srv.Listener.Addr().String()
			t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
			spec := bridge.ServerSpec{Name: opts.Name, Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp", Source: "test", Fingerprint: "sha256:" + opts.Name}
			if !opts.Stateless {
				// A stateful server killed and started again forgets its
				// sessions: what Restart does.
				return spec, replay.Cancelled, replay.Restart, func() {}
			}
			kill := func() { srv.CloseClientConnections(); srv.Close() }
			back := func() {
				l, err := net.Listen("tcp", addr)
				if err != nil {
					t.Fatalf("listen again at %s: %v", addr, err)
				}
				again := httptest.NewUnstartedServer(replay)
				again.Listener.Close()
				again.Listener = l
				again.Start()
				t.Cleanup(func() { again.CloseClientConnections(); again.Close() })
			}
			return spec, replay.Cancelled, kill, back
		}
	}
	stateless := func(o bridgetest.HTTPOptions) bridgetest.HTTPOptions {
		o.Stateless = true
		o.Name += "-stateless"
		return o
	}
	rows := []row{
		{"mcp 1.29.0", "stdio", false, stdioRow("python-mcp-1.29.0", bridgetest.PythonMCP1Mode())},
		{"mcp 1.29.0", "http stateful", false, httpRow(bridgetest.PythonMCP1(false))},
		{"mcp 1.29.0", "http stateless", false, httpRow(stateless(bridgetest.PythonMCP1(false)))},
		{"mcp 2.0.0", "stdio", true, stdioRow("python-mcp-2.0.0", bridgetest.PythonMCP2Mode())},
		{"mcp 2.0.0", "http stateless", true, httpRow(bridgetest.PythonMCP2())},
	}
	var matrix []string
	t.Cleanup(func() {
		for _, line := range matrix {
			t.Log(line)
		}
	})
	for _, r := range rows {
		t.Run(r.server+" "+r.transport, func(t *testing.T) {
			outcome := map[string]string{}
			steps := []string{"connect", "progress", "cancel", "next call", "kill+reconnect"}
			defer func() {
				line := fmt.Sprintf("%-10s × %-14s:", r.server, r.transport)
				for _, s := range steps {
					o := outcome[s]
					if o == "" {
						o = "FAIL"
					}
					line += fmt.Sprintf(" %s %s;", s, o)
				}
				matrix = append(matrix, line)
			}()
			spec, cancelled, kill, back := r.start(t)
			ctx := testCtx(t, 60*time.Second)
			h := newHarness(t, bridge.Options{LivenessInterval: 2 * time.Second, LivenessTimeout: time.Second}, spec)
			p := h.page(ctx)
			c := connect(t, ctx, p, "connect", spec)
			want := map[bool]string{true: "2026-07-28", false: "2025-11-25"}[r.modern]
			if c.Str("protocolVersion") != want {
				t.Fatalf("protocolVersion %q, want %q", c.Str("protocolVersion"), want)
			}
			var info struct{ Name, Version string }
			json.Unmarshal(c.Fields["serverInfo"], &info)
			if r.modern && info.Version != "" || !r.modern && info.Version != "1.29.0" {
				t.Errorf("serverInfo %s", c.Fields["serverInfo"])
			}
			outcome["connect"] = "ok (" + want + ")"

			res, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": "long", "server": spec.Name, "tool": "slow", "arguments": map[string]any{"steps": 4, "intervalMs": 50}})
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, res)
			progress := 0
			for _, m := range p.All() {
				if m.Type == "tools:progress" && string(m.ID) == `"long"` {
					progress++
				}
			}
			if progress < 3 {
				t.Fatalf("%d tools:progress for 4 steps, want at least 3", progress)
			}
			if r.modern && !bytes.Contains(res.Fields["result"], []byte(`"resultType":"complete"`)) {
				t.Errorf("the result lost resultType: %s", res.Fields["result"])
			}
			outcome["progress"] = fmt.Sprintf("ok (%d)", progress)

			callAndCancel(t, ctx, p, spec.Name, "cancel-me")
			waitFor(t, 10*time.Second, "the server to stop the cancelled call", func() bool { return cancelled() == 1 })
			outcome["cancel"] = "ok (server stopped)"

			res, _ = p.Request(ctx, map[string]any{"type": "tools:call", "id": "after", "server": spec.Name, "tool": "echo", "arguments": map[string]any{"x": 1}})
			mustOK(t, res)
			if r.modern && !bytes.Contains(res.Fields["result"], []byte(`"io.modelcontextprotocol/serverInfo"`)) {
				t.Errorf("the result lost its _meta: %s", res.Fields["result"])
			}
			for _, m := range p.All() {
				if m.Type == "tools:closed" {
					t.Fatalf("the session closed: %s", m)
				}
			}
			outcome["next call"] = "ok"

			kill()
			if r.transport != "stdio" {
				// Nothing tells the bridge of an HTTP server's end until
				// it sends something: the next call finds out.
				res, _ = p.Request(ctx, map[string]any{"type": "tools:call", "id": "dead", "server": spec.Name, "tool": "echo"})
				if res.OK != nil && *res.OK {
					t.Fatalf("a call to a killed server succeeded: %s", res)
				}
				t.Logf("the call to the killed server: %s", res)
			}
			closed, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:closed" })
			if err != nil {
				t.Fatalf("no tools:closed after the kill: %v", err)
			}
			back()
			connect(t, ctx, p, "again", spec)
			res, _ = p.Request(ctx, map[string]any{"type": "tools:call", "id": "call-again", "server": spec.Name, "tool": "echo"})
			mustOK(t, res)
			outcome["kill+reconnect"] = "ok (" + closed.Str("message") + ")"
		})
	}
}
