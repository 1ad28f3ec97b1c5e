package bridge_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
)

// needComponent fails under CI (where .ci/run installs the component) and
// skips with a message on a developer's machine.
func needComponent(t testing.TB, what, install string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing; .ci/run must install it (%s)", what, install)
	}
	t.Skipf("%s is not installed (%s); skipping", what, install)
}

// everythingJS returns the path of @modelcontextprotocol/server-everything's
// entry point, installed by .ci/run into .ci/node.
func everythingJS(t testing.TB) (node, js string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	js = filepath.Join(filepath.Dir(file), "..", ".ci", "node", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	node, err := exec.LookPath("node")
	if err != nil {
		needComponent(t, "node", "the machine's Node.js")
	}
	if _, err := os.Stat(js); err != nil {
		needComponent(t, "@modelcontextprotocol/server-everything", "npm ci --prefix .ci/node")
	}
	return node, js
}

func everythingStdio(t testing.TB) bridge.ServerSpec {
	node, js := everythingJS(t)
	return bridge.ServerSpec{Name: "everything", Transport: bridge.TransportStdio, Command: node,
		Args: []string{js, "stdio"}, Source: "test", Fingerprint: "sha256:everything-stdio"}
}

// startEverythingHTTP runs server-everything's Streamable HTTP transport and
// returns its URL; the process group is killed at cleanup.
func startEverythingHTTP(t testing.TB) (url string, restart func()) {
	t.Helper()
	node, js := everythingJS(t)
	port := bridgetest.FreePort(t)
	var cmd *exec.Cmd
	start := func() {
		cmd = exec.Command(node, js, "streamableHttp")
		cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
		child.InGroup(cmd)
		stderr, _ := cmd.StderrPipe()
		cmd.Stdout = nil
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { // drain
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
			}
		}()
		deadline := time.Now().Add(20 * time.Second)
		for {
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err == nil {
				c.Close()
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("server-everything did not listen on port %d", port)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	stop := func() {
		child.KillGroup(cmd.Process)
		cmd.Wait()
	}
	start()
	t.Cleanup(stop)
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port), func() { stop(); start() }
}

func TestEverything(t *testing.T) {
	stdio := everythingStdio(t)
	url, _ := startEverythingHTTP(t)
	httpSpec := bridge.ServerSpec{Name: "everything-http", Transport: bridge.TransportHTTP, URL: url,
		Headers: map[string]string{"X-Lab-Key": "lab-secret"}, Source: "test", Fingerprint: "sha256:everything-http"}
	for _, spec := range []bridge.ServerSpec{stdio, httpSpec} {
		t.Run(spec.Transport, func(t *testing.T) {
			ctx := testCtx(t, 60*time.Second)
			h := newHarness(t, bridge.Options{Environ: append(os.Environ(), "JUPYTERHUB_API_TOKEN=hub-secret"),
				StripEnv: []string{"JUPYTERHUB_API_TOKEN"}}, spec)
			p := h.page(ctx)
			c := connect(t, ctx, p, 1, spec)
			var tools []struct{ Name string }
			json.Unmarshal(c.Fields["tools"], &tools)
			names := map[string]bool{}
			for _, tl := range tools {
				names[tl.Name] = true
			}
			for _, want := range []string{"echo", "trigger-long-running-operation", "get-env"} {
				if !names[want] {
					t.Fatalf("listing lacks %s: %s", want, c.Fields["tools"])
				}
			}

			r, _ := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "tool": "echo", "arguments": map[string]any{"message": "hi there"}})
			mustOK(t, r)
			if !strings.Contains(string(r.Fields["result"]), "hi there") {
				t.Fatalf("echo: %s", r)
			}

			// Progress, then a completed long-running operation.
			r, _ = p.Request(ctx, map[string]any{"type": "tools:call", "id": 3, "server": spec.Name, "tool": "trigger-long-running-operation", "arguments": map[string]any{"duration": 1, "steps": 4}})
			mustOK(t, r)
			var progress int
			for _, m := range p.All() {
				if m.Type == "tools:progress" && string(m.ID) == "3" {
					progress++
				}
			}
			if progress < 3 {
				t.Fatalf("want progress for call 3, got %d notifications", progress)
			}

			// Cancel a long one: answered cancelled at once; nothing later reaches the page.
			p.Send(map[string]any{"type": "tools:call", "id": 4, "server": spec.Name, "tool": "trigger-long-running-operation", "arguments": map[string]any{"duration": 3, "steps": 6}})
			if _, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" && string(m.ID) == "4" }); err != nil {
				t.Fatal(err)
			}
			p.Send(map[string]any{"type": "tools:cancel", "id": 4})
			r, _ = p.Reply(ctx, "tools:call", 4)
			mustErr(t, r, bridge.CodeCancelled)
			cancelledAt := len(p.All())
			time.Sleep(1500 * time.Millisecond) // server-everything keeps sending progress after a cancel
			for _, m := range p.All()[cancelledAt:] {
				if string(m.ID) == "4" && m.Type != "tools:cancel" {
					t.Fatalf("message for a cancelled call reached the page: %s", m)
				}
			}

			// A server's request to the client (sampling) is never forwarded to the page.
			before := len(p.All())
			r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 5, "server": spec.Name, "tool": "trigger-sampling-request", "arguments": map[string]any{"prompt": "hello", "maxTokens": 10}})
			if err != nil || r.OK == nil {
				t.Fatalf("the sampling tool's call must be answered: %v", err)
			}
			if *r.OK && !strings.Contains(string(r.Fields["result"]), `"isError":true`) {
				t.Fatalf("sampling cannot have succeeded: the bridge offers no sampling: %s", r)
			}
			for _, m := range p.All()[before:] {
				if m.Type != "tools:call" && m.Type != "tools:progress" {
					t.Fatalf("a server request reached the page: %s", m)
				}
			}

			if spec.Transport == bridge.TransportStdio {
				// The credential firewall: the child's environment lacks the stripped variable.
				r, _ = p.Request(ctx, map[string]any{"type": "tools:call", "id": 6, "server": spec.Name, "tool": "get-env", "arguments": map[string]any{}})
				mustOK(t, r)
				if strings.Contains(string(r.Fields["result"]), "hub-secret") || strings.Contains(string(r.Fields["result"]), "JUPYTERHUB_API_TOKEN") {
					t.Fatalf("a stripped credential reached the tool server's environment")
				}
				if !strings.Contains(string(r.Fields["result"]), "PATH") {
					t.Fatalf("the child must inherit the bridge's environment: %.300s", r.Fields["result"])
				}
			}
		})
	}
}

func TestHTTPServerRestartLosesSession(t *testing.T) {
	leakCheck(t) // after the server's cleanup
	url, restart := startEverythingHTTP(t)
	spec := bridge.ServerSpec{Name: "everything-http", Transport: bridge.TransportHTTP, URL: url, Source: "test", Fingerprint: "sha256:e"}
	ctx := testCtx(t, 60*time.Second)
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	restart()
	// The next call finds the session gone: answered server-failed, and the
	// page is told the session closed.
	r, _ := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "tool": "echo", "arguments": map[string]any{"message": "x"}})
	if r.OK != nil && *r.OK {
		t.Fatalf("a call on a lost session must fail: %s", r)
	}
	if _, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:closed" }); err != nil {
		t.Fatalf("no tools:closed after the server lost the session: %v", err)
	}
	// The next connect works.
	connect(t, ctx, p, 3, spec)
	r, _ = p.Request(ctx, map[string]any{"type": "tools:call", "id": 4, "server": spec.Name, "tool": "echo", "arguments": map[string]any{"message": "again"}})
	mustOK(t, r)
}

func TestHTTPMustBeHTTPSUnlessLoopback(t *testing.T) {
	ctx := testCtx(t, 10*time.Second)
	spec := bridge.ServerSpec{Name: "remote", Transport: bridge.TransportHTTP, URL: "http://tools.example.org/mcp", Source: "test", Fingerprint: "sha256:r"}
	h := newHarness(t, bridge.Options{HTTPTransport: refuseAll{}}, spec)
	p := h.page(ctx)
	r, _ := p.Request(ctx, map[string]any{"type": "tools:connect", "id": 1, "server": "remote", "fingerprint": "sha256:r", "confirmed": true})
	mustErr(t, r, bridge.CodeServerFailed)
	if !strings.Contains(r.Error.Message, "https") {
		t.Fatalf("message: %q", r.Error.Message)
	}
}

// refuseAll is an HTTP transport that must never be used.
type refuseAll struct{}

func (refuseAll) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("no request may leave this test")
}
