// Command mcpconformance is the client the MCP conformance suite
// (@modelcontextprotocol/conformance, both its 0.1 line and its 0.2 line)
// launches to test the bridge's MCP client: it runs a real Bridge
// in-process with one Streamable HTTP entry, the URL the suite appends to
// its command line, and drives it as a Builder page would over the
// WebSocket: tools:connect, then the tools:call requests its scenario table
// (plans) holds for the scenario in MCP_CONFORMANCE_SCENARIO. It exits
// non-zero when the page gets anything the plan does not expect, and
// prints "plan done" last when it got everything it expected. It never
// talks MCP itself, never reads a token or a configuration file, and never
// runs outside tests and CI.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// step is one tools:call the page makes and what it must get: the call's
// result (refused == "") or a refusal with that error code.
type step struct {
	tool    string
	args    json.RawMessage
	refused string
}

// connected is what a plan may read: the tools:connect reply and the
// suite's scenario context.
type connected struct {
	tools   map[string]json.RawMessage // by name, each tool's definition as the page got it
	dropped map[string]string          // droppedTools: name to reason
	context json.RawMessage            // MCP_CONFORMANCE_CONTEXT (0.2 line), or nil
}

// plan returns the calls that complete a scenario after tools:connect
// (server/discover or initialize, then tools/list), or an error when the
// connect reply already shows the bridge wrong.
type plan func(c *connected) ([]step, error)

// plans are the client scenarios of the suite the bridge must pass, each
// with its calls (nil: the scenario only needs the connect). Every client
// scenario the suite lists is here or in notApplicable (the test checks).
var plans = map[string]plan{
	// The handshake of 2025-06-18 and 2025-11-25: the bridge offers
	// 2026-07-28 first and falls back.
	"initialize": nil,
	"tools_call": calls(step{tool: "add_numbers", args: raw(`{"a":5,"b":3}`)}),
	// The server cuts the call's event stream; go-sdk resumes it.
	"sse-retry": calls(step{tool: "test_reconnection", args: raw(`{}`)}),
	// Every request of 2026-07-28 carries _meta and MCP-Protocol-Version;
	// the first is refused with the supported versions and retried. The
	// server lists no tool.
	"request-metadata": nil,
	// Mcp-Method on every request, Mcp-Name on tools/call, a hyphen in it.
	"http-standard-headers": calls(
		step{tool: "test_headers", args: raw(`{}`)},
		step{tool: "my-hyphenated-tool", args: raw(`{}`)}),
	// Mcp-Param-* headers for x-mcp-header arguments, encoded as the
	// revision says; the suite gives the arguments in its context.
	"http-custom-headers": contextCalls,
	// Tools with invalid x-mcp-header declarations are left out (and named
	// in droppedTools), so a call to one is refused by the bridge and never
	// reaches the server; the valid tool is kept.
	"http-invalid-tool-headers": invalidToolHeaders,
	// The schema's network $ref is never fetched: connecting lists the tool.
	"json-schema-ref-no-deref": nil,
	// The focal tool's inputSchema, as the page got it, sent back to the
	// echo tool: the bridge kept every JSON Schema 2020-12 keyword.
	"json-schema-2020-12-preservation": echoSchema,
}

// notApplicable are the client scenarios that do not apply to the bridge,
// by name or by prefix (ending in "/"), with the reason (README "MCP
// conformance" lists them too).
var notApplicable = map[string]string{
	"auth/": "OAuth authorization flows: the bridge does not do OAuth; an entry's headers carry its credentials",
	"elicitation-sep1034-client-defaults": "elicitation: the bridge does not offer it, since the Builder page " +
		"cannot answer a server's questions in the middle of a call",
	"sep-2322-client-request-state": "multi-round-trip results (input_required): the scenario needs the client " +
		"to answer elicitation/create and retry; the bridge answers such a result to the page as an error " +
		"naming what the tool wanted (bridge TestInputRequired), since the Builder cannot supply it",
	"sep-2640-": "the Skills extension (skills/list, skill files as resources): the bridge relays tools only " +
		"and never lists or reads skills or resources",
}

// NotApplicable returns why scenario does not apply, or "".
func NotApplicable(scenario string) string {
	if r := notApplicable[scenario]; r != "" {
		return r
	}
	for k, r := range notApplicable {
		if (strings.HasSuffix(k, "/") || strings.HasSuffix(k, "-")) && strings.HasPrefix(scenario, k) {
			return r
		}
	}
	return ""
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func calls(steps ...step) plan {
	return func(*connected) ([]step, error) { return steps, nil }
}

// contextCalls makes the calls the suite's context lists (toolCalls).
func contextCalls(c *connected) ([]step, error) {
	var ctx struct {
		ToolCalls []struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"toolCalls"`
	}
	if err := json.Unmarshal(c.context, &ctx); err != nil || len(ctx.ToolCalls) == 0 {
		return nil, fmt.Errorf("MCP_CONFORMANCE_CONTEXT has no toolCalls: %s", c.context)
	}
	var out []step
	for _, tc := range ctx.ToolCalls {
		out = append(out, step{tool: tc.Name, args: tc.Arguments})
	}
	return out, nil
}

// invalidToolHeaders calls the valid tool, and every tool the bridge
// dropped, which it must refuse; every tool but valid_tool must have been
// dropped, each with a reason.
func invalidToolHeaders(c *connected) ([]step, error) {
	if _, ok := c.tools["valid_tool"]; !ok {
		return nil, fmt.Errorf("valid_tool is not in the listing the page got")
	}
	if len(c.tools) != 1 {
		return nil, fmt.Errorf("the page got %d tools, want valid_tool alone", len(c.tools))
	}
	if len(c.dropped) == 0 {
		return nil, fmt.Errorf("droppedTools is empty")
	}
	steps := []step{{tool: "valid_tool", args: raw(`{"region":"us-west1"}`)}}
	names := make([]string, 0, len(c.dropped))
	for name, reason := range c.dropped {
		if reason == "" {
			return nil, fmt.Errorf("droppedTools gives no reason for %s", name)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		steps = append(steps, step{tool: name, args: raw(`{"value":"x"}`), refused: bridge.CodeUnknownTool})
	}
	return steps, nil
}

// echoSchema sends json_schema_2020_12_tool's inputSchema to
// json_schema_echo.
func echoSchema(c *connected) ([]step, error) {
	var focal struct {
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	if err := json.Unmarshal(c.tools["json_schema_2020_12_tool"], &focal); err != nil || len(focal.InputSchema) == 0 {
		return nil, fmt.Errorf("json_schema_2020_12_tool has no inputSchema in the listing the page got")
	}
	args, _ := json.Marshal(map[string]json.RawMessage{"schema": focal.InputSchema})
	return []step{{tool: "json_schema_echo", args: args}}, nil
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
	p, ok := plans[scenario]
	if !ok {
		if why := NotApplicable(scenario); why != "" {
			return fmt.Errorf("scenario %q does not apply to the bridge: %s", scenario, why)
		}
		return fmt.Errorf("scenario %q is not in the adapter's table", scenario)
	}
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
	page, _, err := bridgetest.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/megane/builder-tools/ws", nil)
	if err != nil {
		return fmt.Errorf("dial the bridge: %w", err)
	}
	defer page.Close()
	r, err := page.Request(ctx, map[string]any{"type": "tools:connect", "id": "connect", "server": spec.Name,
		"fingerprint": spec.Fingerprint, "confirmed": true})
	if err != nil {
		return fmt.Errorf("tools:connect: %w", err)
	}
	if r.OK == nil || !*r.OK {
		return fmt.Errorf("tools:connect failed: %s", r.Raw)
	}
	fmt.Printf("connected: protocolVersion %s, serverInfo %s, %d bytes of tools\n",
		r.Fields["protocolVersion"], r.Fields["serverInfo"], len(r.Fields["tools"]))
	if err := checkRevision(r.Str("protocolVersion"), os.Getenv("MCP_CONFORMANCE_PROTOCOL_VERSION")); err != nil {
		return err
	}
	c, err := connectedFrom(r)
	if err != nil {
		return err
	}
	var steps []step
	if p != nil {
		if steps, err = p(c); err != nil {
			return err
		}
	}
	for i, s := range steps {
		r, err := page.Request(ctx, map[string]any{"type": "tools:call", "id": i + 1, "server": spec.Name,
			"tool": s.tool, "arguments": s.args})
		if err != nil {
			return fmt.Errorf("tools:call %s: %w", s.tool, err)
		}
		switch {
		case s.refused == "" && (r.OK == nil || !*r.OK):
			return fmt.Errorf("tools:call %s failed: %s", s.tool, r.Raw)
		case s.refused != "" && (r.Error == nil || r.Error.Code != s.refused):
			return fmt.Errorf("tools:call %s: want it refused with %s, got %s", s.tool, s.refused, r.Raw)
		case s.refused != "":
			fmt.Printf("%s: refused (%s)\n", s.tool, r.Error.Code)
		default:
			fmt.Printf("%s: %s\n", s.tool, r.Fields["result"])
		}
	}
	fmt.Printf("plan done: %s, %d calls\n", scenario, len(steps))
	return nil
}

// checkRevision: under a suite run at 2026-07-28 the bridge must speak it;
// at an earlier revision (or the 0.1 line, which does not say) it must have
// fallen back to one of the earlier revisions.
func checkRevision(got, suite string) error {
	if suite == "2026-07-28" && got != suite || suite != "2026-07-28" && got >= "2026-07-28" {
		return fmt.Errorf("the suite runs the scenario at revision %q but the bridge agreed on %q", suite, got)
	}
	return nil
}

func connectedFrom(r *bridgetest.Msg) (*connected, error) {
	c := &connected{tools: map[string]json.RawMessage{}, dropped: map[string]string{}}
	var tools []json.RawMessage
	if err := json.Unmarshal(r.Fields["tools"], &tools); err != nil {
		return nil, fmt.Errorf("tools:connect tools: %w", err)
	}
	for _, t := range tools {
		var n struct{ Name string }
		_ = json.Unmarshal(t, &n)
		c.tools[n.Name] = t
	}
	if d := r.Fields["droppedTools"]; len(d) > 0 {
		var dropped []struct{ Name, Reason string }
		if err := json.Unmarshal(d, &dropped); err != nil {
			return nil, fmt.Errorf("tools:connect droppedTools: %w", err)
		}
		for _, t := range dropped {
			c.dropped[t.Name] = t.Reason
		}
	}
	if s := os.Getenv("MCP_CONFORMANCE_CONTEXT"); s != "" {
		c.context = bytes.TrimSpace([]byte(s))
	}
	return c, nil
}
