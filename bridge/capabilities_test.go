package bridge_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// TestWhatReachesAServer records everything the bridge sends a stdio
// server over a session that connects, calls, cancels a call and
// disconnects, for a server of 2025-11-25 (bridgetest's) and one of
// 2026-07-28 (go-sdk's). server/discover offers 2026-07-28 with the
// bridge's name and version and no client capability; refused, the
// fallback initialize is exactly 2025-11-25, the same name and version,
// and no capability (the bridge implements none; go-sdk's default
// advertised roots, contradicting the docs: issue 13). Nothing reaches
// the server but the revision's discovery (server/discover; initialize
// and notifications/initialized for 2025-11-25; subscriptions/listen,
// where 2026-07-28 delivers tools/list_changed), tools/list, tools/call,
// notifications/cancelled and ping.
func TestWhatReachesAServer(t *testing.T) {
	discover := `{"_meta":{
		"io.modelcontextprotocol/protocolVersion":"2026-07-28",
		"io.modelcontextprotocol/clientInfo":{"name":"megane-jupyter-bridge","version":"9.9.9"},
		"io.modelcontextprotocol/clientCapabilities":{}}}`
	t.Run("2025-11-25", func(t *testing.T) {
		j := journal(t)
		spec := fakeServer(t, "fake", bridgetest.Mode{Journal: j})
		connectCallCancelDisconnect(t, spec, "echo", func() bool { return slices.Contains(journalMethods(t, j), "notifications/cancelled") })
		entries, err := bridgetest.ReadJournal(j)
		if err != nil {
			t.Fatal(err)
		}
		allowed := []string{"server/discover", "initialize", "notifications/initialized", "tools/list", "tools/call", "notifications/cancelled", "ping"}
		var methods []string
		for _, e := range entries {
			switch {
			case e.Start:
				continue
			case e.Method == "":
				t.Errorf("the server received something that is not a request or notification: %+v", e)
				continue
			case !slices.Contains(allowed, e.Method):
				t.Errorf("the server received %s; only %v may reach it", e.Method, allowed)
			case e.Method == "server/discover":
				sameJSON(t, "server/discover params", e.Params, discover)
			case e.Method == "initialize":
				sameJSON(t, "initialize params", e.Params, `{"protocolVersion":"2025-11-25","capabilities":{},
					"clientInfo":{"name":"megane-jupyter-bridge","version":"9.9.9"}}`)
			case e.Method == "notifications/cancelled":
				if e.Matched == nil || !*e.Matched {
					t.Errorf("notifications/cancelled named no call in flight: %s", e.Cancelled)
				}
			}
			methods = append(methods, e.Method)
		}
		if want := []string{"server/discover", "initialize", "notifications/initialized", "tools/list"}; len(methods) < 4 || !slices.Equal(methods[:4], want) {
			t.Errorf("the session began with %v, want %v", methods, want)
		}
		for _, m := range []string{"tools/call", "notifications/cancelled"} {
			if !slices.Contains(methods, m) {
				t.Errorf("the server never received %s: %v", m, methods)
			}
		}
	})
	t.Run("2026-07-28", func(t *testing.T) {
		j := journal(t)
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		mode, _ := json.Marshal(bridge.ModernServerMode{Journal: j})
		spec := bridge.ServerSpec{Name: "modern", Transport: bridge.TransportStdio, Command: exe, Args: []string{"-test.run=^$"},
			Env: map[string]string{bridge.ModernServerEnv: string(mode)}, Source: "test", Fingerprint: "sha256:modern"}
		connectCallCancelDisconnect(t, spec, "hello", func() bool { return strings.Contains(readFile(t, j), `"cancelled:slow"`) })
		allowed := []string{"server/discover", "subscriptions/listen", "tools/list", "tools/call", "notifications/cancelled", "ping", "cancelled:slow"}
		var methods []string
		for _, line := range strings.Split(strings.TrimSpace(readFile(t, j)), "\n") {
			var e struct {
				Method string
				Params json.RawMessage
			}
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("journal: %v: %s", err, line)
			}
			if !slices.Contains(allowed, e.Method) {
				t.Errorf("the server received %s; only %v may reach it", e.Method, allowed)
			}
			if e.Method == "server/discover" {
				sameJSON(t, "server/discover params", e.Params, discover)
			}
			methods = append(methods, e.Method)
		}
		for _, m := range []string{"server/discover", "tools/list", "tools/call", "notifications/cancelled"} {
			if !slices.Contains(methods, m) {
				t.Errorf("the server never received %s: %v", m, methods)
			}
		}
	})
	t.Run("2026-07-28 over HTTP", func(t *testing.T) {
		// Revision 2026-07-28 over Streamable HTTP: closing a call's
		// response stream is its cancellation, and the client POSTs
		// nothing but requests. The server accepts notifications (202),
		// so only the bridge can keep them away.
		replay, err := bridgetest.NewHTTPReplay(bridgetest.HTTPOptions{Name: "modern-http", Modern: true})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(replay)
		t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
		spec := bridge.ServerSpec{Name: "modern-http", Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp", Source: "test", Fingerprint: "sha256:modern-http"}
		connectCallCancelDisconnect(t, spec, "echo", func() bool { return replay.Cancelled() >= 1 })
		requests := []string{"server/discover", "tools/list", "tools/call", "ping"}
		for _, r := range replay.Requests() {
			if r.HTTPMethod == http.MethodPost && !slices.Contains(requests, r.RPCMethod) {
				t.Errorf("POSTed %q to a server of 2026-07-28; only requests (%v) may be", r.RPCMethod, requests)
			}
			if r.RPCMethod != "" && r.Header.Get("Mcp-Protocol-Version") != "2026-07-28" {
				t.Errorf("%s sent under revision %q", r.RPCMethod, r.Header.Get("Mcp-Protocol-Version"))
			}
		}
		if !slices.Contains(replay.Methods(), "tools/call") {
			t.Errorf("no tools/call reached the server: %v", replay.Methods())
		}
	})
}

// connectCallCancelDisconnect connects a page to spec, calls tool (with
// {"name":"x"}), calls slow and cancels it once it reported progress,
// waits until cancelled() (the server saw the cancel), disconnects and
// waits for the session to stop.
func connectCallCancelDisconnect(t *testing.T, spec bridge.ServerSpec, tool string, cancelled func() bool) {
	t.Helper()
	h := newHarness(t, bridge.Options{Name: "megane-jupyter-bridge", Version: "9.9.9"}, spec)
	ctx := testCtx(t, 30*time.Second)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "tool": tool, "arguments": map[string]any{"name": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	if err := p.Send(map[string]any{"type": "tools:call", "id": 3, "server": spec.Name, "tool": "slow", "arguments": map[string]any{"steps": 100, "intervalMs": 100}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" && string(m.ID) == "3" }); err != nil {
		t.Fatal(err)
	}
	if err := p.Send(map[string]any{"type": "tools:cancel", "id": 3}); err != nil {
		t.Fatal(err)
	}
	r, err = p.Reply(ctx, "tools:call", 3)
	if err != nil {
		t.Fatal(err)
	}
	mustErr(t, r, bridge.CodeCancelled)
	waitFor(t, 10*time.Second, "the server to see the call cancelled", cancelled)
	r, err = p.Request(ctx, map[string]any{"type": "tools:disconnect", "id": 4, "server": spec.Name})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	waitFor(t, 10*time.Second, "the session to stop", func() bool {
		r, _ := p.Request(ctx, map[string]any{"type": "tools:servers", "id": "s"})
		var servers []struct{ State string }
		json.Unmarshal(r.Fields["servers"], &servers)
		return len(servers) == 1 && servers[0].State == "stopped"
	})
}

// sameJSON fails unless got and want are the same JSON value.
func sameJSON(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s: %v: %s", what, err, got)
		return
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: want: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: got %s, want %s", what, got, want)
	}
}
