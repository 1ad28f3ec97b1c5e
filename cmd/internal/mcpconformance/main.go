// Command mcpconformance is the client the MCP conformance suite
// (@modelcontextprotocol/conformance) launches to test the bridge's MCP
// client: it runs a real Bridge in-process with one Streamable HTTP entry,
// the URL the suite appends to its command line, and drives it as a Builder
// page would over the WebSocket (tools:connect, then the tools:call the
// scenario in MCP_CONFORMANCE_SCENARIO asks for). It exits non-zero when the
// page gets an error. It never talks MCP itself, never reads a token or a
// configuration file, and never runs outside tests and CI.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// calls maps a client scenario to the tools:call requests that complete it
// (after tools:connect, which is initialize and tools/list). A scenario not
// listed only connects.
var calls = map[string][]map[string]any{
	"tools_call": {{"tool": "add_numbers", "arguments": map[string]any{"a": 5, "b": 3}}},
	"sse-retry":  {{"tool": "test_reconnection", "arguments": map[string]any{}}},
}

func main() { os.Exit(adapter()) }

// adapter is the command: run with the URL the suite appended (the last
// argument) and the scenario it names; the exit status.
func adapter() int {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mcpconformance <server-url> (the conformance suite appends it)")
		return 2
	}
	if err := run(os.Args[len(os.Args)-1], os.Getenv("MCP_CONFORMANCE_SCENARIO")); err != nil {
		fmt.Fprintln(os.Stderr, "mcpconformance:", err)
		return 1
	}
	return 0
}

// gate admits everyone: the socket is local to this process.
type gate struct{}

func (gate) Admit(context.Context, *http.Request) (bridge.Admission, *bridge.Refusal) {
	return bridge.Admission{User: "conformance"}, nil
}

// confirmAll accepts any receipt; connects here are always confirmed.
type confirmAll struct{}

func (confirmAll) Issue(string, string, string) (string, error) { return "", nil }
func (confirmAll) Check(string, string, string, string) error   { return nil }

func run(url, scenario string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	spec := bridge.ServerSpec{Name: "conformance", Transport: bridge.TransportHTTP, URL: url,
		Source: "conformance", Fingerprint: "sha256:conformance"}
	b := bridge.New(bridge.Options{Catalog: bridge.StaticCatalog{Servers: []bridge.ServerSpec{spec}},
		Gate: gate{}, Approvals: confirmAll{}, Logger: log, InitTimeout: 20 * time.Second})
	defer b.Close()
	srv := httptest.NewServer(b)
	defer srv.Close()
	p, _, err := bridgetest.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/megane/builder-tools/ws", nil)
	if err != nil {
		return fmt.Errorf("dial the bridge: %w", err)
	}
	defer p.Close()
	r, err := p.Request(ctx, map[string]any{"type": "tools:connect", "id": "connect", "server": spec.Name,
		"fingerprint": spec.Fingerprint, "confirmed": true})
	if err != nil {
		return fmt.Errorf("tools:connect: %w", err)
	}
	if r.OK == nil || !*r.OK {
		return fmt.Errorf("tools:connect failed: %s", r.Raw)
	}
	fmt.Printf("connected: serverInfo %s, %d bytes of tools\n", r.Fields["serverInfo"], len(r.Fields["tools"]))
	for i, c := range calls[scenario] {
		req := map[string]any{"type": "tools:call", "id": i + 1, "server": spec.Name}
		for k, v := range c {
			req[k] = v
		}
		r, err := p.Request(ctx, req)
		if err != nil {
			return fmt.Errorf("tools:call %s: %w", c["tool"], err)
		}
		if r.OK == nil || !*r.OK {
			return fmt.Errorf("tools:call %s failed: %s", c["tool"], r.Raw)
		}
		var res json.RawMessage = r.Fields["result"]
		fmt.Printf("%s: %s\n", c["tool"], res)
	}
	return nil
}
