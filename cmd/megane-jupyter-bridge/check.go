package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// runCheck is `check`: start each named server (every configured one when
// none is named, or one command after --, or a Streamable HTTP URL) as the
// bridge would, and check its tools against the Builder Tool Contract: the
// definitions (§3, §4) and a call of each Builder tool with sample
// arguments (§5, §6). One line per finding; an error (exit status 1) when
// any finding is a fail.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	var cf configFlags
	cf.register(fs)
	cf.registerStandalone(fs)
	asJSON := fs.Bool("json", false, "print the findings as a JSON array")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long starting a server, and each call, may take")
	if err := parseFlags(fs, args, checkHelp, stdout, stderr); err != nil {
		return err
	}
	if err := cf.standaloneSetup(); err != nil {
		return err
	}
	var entries []bridge.ServerSpec
	var cfg *jupyter.Config
	rest := fs.Args()
	dash := len(args) > 0 && len(rest) > 0 && argsHaveDash(args, rest)
	switch {
	case dash:
		cmd, err := exec.LookPath(rest[0])
		if err != nil {
			return fmt.Errorf("check: %w", err)
		}
		if abs, err := filepath.Abs(cmd); err == nil {
			cmd = abs
		}
		entries = []bridge.ServerSpec{{Name: filepath.Base(rest[0]), Transport: bridge.TransportStdio, Command: cmd, Args: rest[1:]}}
		cfg = &jupyter.Config{}
	case len(rest) == 1 && (strings.HasPrefix(rest[0], "http://") || strings.HasPrefix(rest[0], "https://")):
		entries = []bridge.ServerSpec{{Name: rest[0], Transport: bridge.TransportHTTP, URL: rest[0]}}
		cfg = &jupyter.Config{}
	default:
		var err error
		if cfg, err = cf.load(ctx); err != nil {
			return err
		}
		for _, name := range rest {
			found := false
			for _, e := range cfg.Servers {
				if e.Name == name {
					entries, found = append(entries, e), true
				}
			}
			if !found {
				return usageError{fmt.Sprintf("check: no configured server %q (megane-jupyter-bridge servers lists them)", name)}
			}
		}
		if len(rest) == 0 {
			entries = cfg.Servers
		}
	}
	var all []finding
	if !*asJSON {
		fmt.Fprintf(stdout, "the Builder Tool Contract (version 1), whose sections the § numbers below are: %s\n", contractURL)
	}
	for _, e := range entries {
		got := checkServer(ctx, cfg, e, *timeout, "")
		all = append(all, got...)
		if !*asJSON {
			for _, f := range got {
				fmt.Fprintln(stdout, f)
			}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if all == nil {
			all = []finding{}
		}
		enc.Encode(all)
	}
	fails := 0
	for _, f := range all {
		if f.Level == "fail" {
			fails++
		}
	}
	if fails > 0 {
		return fmt.Errorf("check: %d finding(s) fail the Builder Tool Contract (%s)", fails, contractURL)
	}
	return nil
}

// argsHaveDash reports whether the arguments after the flags came after a
// "--" (a command to start rather than server names).
func argsHaveDash(args, rest []string) bool {
	i := len(args) - len(rest) - 1
	return i >= 0 && args[i] == "--"
}

// checkServer connects to e as the bridge would and checks every tool. The
// MCP revision is the one the bridge agrees on with the server: revision,
// when doctor has just probed it, or else a probe's (bridge.Probe, which
// starts the server once more), so that a server of either revision is
// checked as pages will use it.
func checkServer(ctx context.Context, cfg *jupyter.Config, e bridge.ServerSpec, timeout time.Duration, revision string) []finding {
	server := &findings{server: e.Name}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if revision == "" {
		p, err := probe(cctx, cfg, e, timeout)
		if err != nil {
			server.add("fail", "§8", "server %s did not start: %v", e.Name, err)
			return server.list
		}
		revision = p.ProtocolVersion
	}
	noise := &stdoutNoise{}
	transport, stdio, tree := checkTransport(cfg, e, noise)
	progress := newProgressCounts()
	client := mcp.NewClient(&mcp.Implementation{Name: "megane-jupyter-bridge-check", Version: version},
		&mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}, ProgressNotificationHandler: progress.handle})
	cs, err := client.Connect(cctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		msg := fmt.Sprintf("server %s did not start: %v", e.Name, err)
		server.add("fail", "§8", "%s", msg+stderrHint(stdio, msg))
		return server.list
	}
	defer cs.Close()
	tools, err := listTools(cctx, cs)
	if err != nil {
		server.add("fail", "§3", "tools/list failed: %v", err)
		return server.list
	}
	c := &caller{cs: cs, progress: progress, tree: tree, timeout: timeout, resultLimit: resultLimit(cfg)}
	builder := 0
	var out []finding
	for _, t := range tools {
		raw, _ := json.Marshal(t)
		bt, defs := checkToolDefinition(e.Name, raw)
		out = append(out, defs...)
		if bt == nil {
			continue
		}
		builder++
		fs := &findings{server: e.Name, tool: bt.Name}
		// Every Builder tool is called, whatever its definition's faults,
		// so that one run names the result's faults too (as
		// megane-builder-conformance does); only a tool without an object
		// inputSchema cannot be, since no sample arguments can be made,
		// nor one of a contract this check does not know.
		switch {
		case bt.Contract != 1:
			fs.add("warn", "§3", "not called: its results would be checked against contract 1, which it does not declare")
		case bt.Input == nil:
			fs.add("warn", "§4", "not called: without an object inputSchema no sample arguments can be made, so its results are not checked")
		default:
			callChecks(ctx, c, fs, bt)
		}
		if !hasFail(defs, "") && !hasFail(fs.list, "") {
			fs.add("ok", "", "keeps the contract (%s, %s)", bt.Apply, jsonText(bt.Meta["category"]))
		}
		out = append(out, fs.list...)
	}
	info := ""
	if ir := cs.InitializeResult(); ir != nil && ir.ServerInfo != nil {
		info = nameVersion(ir.ServerInfo.Name, ir.ServerInfo.Version)
	}
	level := "ok"
	if builder == 0 {
		level = "warn"
	}
	server.add(level, "§3", "server %s%s: %d tools, %d of them Builder tools", e.Name, info, len(tools), builder)
	stdoutFindings(server, stdio != nil, noise)
	return append(server.list, out...)
}

// listTools lists every page of tools.
func listTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	for cursor := ""; ; {
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, err
		}
		tools = append(tools, res.Tools...)
		if cursor = res.NextCursor; cursor == "" {
			return tools, nil
		}
	}
}

// resultLimit is the largest result the bridge accepts (the admin's
// [limits] result_limit, else the bridge's default).
func resultLimit(cfg *jupyter.Config) int64 {
	if cfg.Admin.ResultLimit > 0 {
		return cfg.Admin.ResultLimit
	}
	return 256 << 20
}

// stdoutFindings reports what a stdio server wrote to stdout besides MCP
// during the whole check (§6).
func stdoutFindings(server *findings, stdio bool, noise *stdoutNoise) {
	if !stdio {
		return
	}
	n, first := noise.count()
	if n == 0 {
		server.add("ok", "§6", "server %s: nothing but MCP messages on stdout", server.server)
		return
	}
	example := ""
	if first != "" {
		example = fmt.Sprintf(", the first %q", first)
	}
	server.add("fail", "§6", "server %s: %d line(s) on stdout that are not MCP messages%s: this bridge skips them, but other hosts lose the connection; send them to stderr", server.server, n, example)
}

// hasFail reports whether list has a fail in section (any section if "").
func hasFail(list []finding, section string) bool {
	for _, f := range list {
		if f.Level == "fail" && (section == "" || strings.HasPrefix(f.Section, section)) {
			return true
		}
	}
	return false
}

// callChecks calls bt with sample arguments (cancelling the first call if
// it runs long, §6) and checks the result (§5) and its time (§6), the same
// seed again (§4.4) and a call without its required arguments (§6).
func callChecks(ctx context.Context, c *caller, fs *findings, bt *builderTool) {
	args := sampleArgs(bt, 7)
	o := c.firstCall(ctx, fs, bt, args)
	if callFailed(fs, bt, o, args, c.timeout) {
		return
	}
	if n := int64(len(o.raw)); n > c.resultLimit {
		fs.add("fail", bridgeRule, "the result is %d bytes, over the bridge's result limit of %d bytes ([limits] result_limit): the bridge refuses it whatever the contract allows (§5.1: up to 500 000 atoms)", n, c.resultLimit)
	}
	doc, _ := args[bt.DocProp].(map[string]any)
	structure := checkResult(fs, bt, o.raw, doc)
	timingFindings(fs, bt, o.took, o.progress)
	deadline := min(builderTimeout(bt), c.timeout)
	if bt.Stochastic && bt.SeedProp != "" && structure != nil {
		again := c.call(ctx, bt.Name, args, deadline, 0)
		var sc struct {
			StructuredContent struct {
				Structure map[string]any `json:"structure"`
			} `json:"structuredContent"`
		}
		if again.err == nil && json.Unmarshal(again.raw, &sc) == nil && jsonText(sc.StructuredContent.Structure) != string(structure) {
			fs.add("fail", "§4.4", "the same arguments and seed gave another structure")
		}
	}
	if len(bt.requiredSet) > 0 {
		refusalFindings(fs, c.call(ctx, bt.Name, map[string]any{}, deadline, 0))
	}
}

// refusalFindings checks the answer to a call without its required
// arguments: a tool error with a one-line message (§6).
func refusalFindings(fs *findings, o outcome) {
	switch {
	case o.err != nil:
		fs.add("warn", "§6", "a call without its required arguments got a JSON-RPC error, not a tool error (Builder shows \"The server failed\"): %v", o.err)
	case !o.res.IsError:
		fs.add("fail", "§6", "a call without its required arguments succeeded")
	case strings.Contains(strings.TrimSpace(firstText(o.res)), "\n"):
		fs.add("warn", "§6", "the tool error for a call without its required arguments is not one line")
	}
}

func firstText(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return "(no text)"
}

// sampleArgs builds arguments for bt from its schema as §4.1 says: each
// property's first example, else its default, else a generic value; seed
// for the seed property.
func sampleArgs(bt *builderTool, seed int) map[string]any {
	props, _ := bt.Input["properties"].(map[string]any)
	args := map[string]any{}
	for _, p := range sortedKeys(props) {
		s := resolve(bt, asMap(props[p]))
		if s == nil {
			continue
		}
		_, hasDefault := s["default"]
		if !bt.requiredSet[p] && !hasDefault && len(asSlice(s["examples"])) == 0 && p != bt.SeedProp && p != bt.DocProp {
			continue
		}
		if p == bt.SeedProp {
			args[p] = seed
			continue
		}
		args[p] = sampleValue(bt, s, 0)
	}
	return args
}

func sampleValue(bt *builderTool, s map[string]any, depth int) any {
	if ex := asSlice(s["examples"]); len(ex) > 0 {
		return ex[0]
	}
	if d, ok := s["default"]; ok {
		return d
	}
	switch s["x-megane-widget"] {
	case "molecule":
		return map[string]any{"name": "water", "molblock": waterMolblock, "smiles": "O"}
	case "atom":
		return 0
	case "element":
		return 6
	case "cell":
		return []any{20.0, 0.0, 0.0, 0.0, 20.0, 0.0, 0.0, 0.0, 20.0}
	case "selection":
		return []any{0}
	case "seed":
		return 7
	case "document":
		return waterDocument()
	}
	if e := asSlice(s["enum"]); len(e) > 0 {
		return e[0]
	}
	switch s["type"] {
	case "integer", "number":
		x := 1.0
		if m, ok := s["minimum"].(float64); ok && x < m {
			x = m
		}
		if m, ok := s["exclusiveMinimum"].(float64); ok && x <= m {
			x = m + 1
		}
		if m, ok := s["maximum"].(float64); ok && x > m {
			x = m
		}
		return x
	case "string":
		return "x"
	case "boolean":
		return false
	case "array":
		items := resolve(bt, asMap(s["items"]))
		n := 1
		if m, ok := s["minItems"].(float64); ok && int(m) > n {
			n = int(m)
		}
		out := make([]any, n)
		for i := range out {
			out[i] = sampleValue(bt, items, depth+1)
		}
		return out
	case "object":
		obj := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		req := map[string]bool{}
		for _, r := range asSlice(s["required"]) {
			if k, ok := r.(string); ok {
				req[k] = true
			}
		}
		for _, k := range sortedKeys(props) {
			sub := resolve(bt, asMap(props[k]))
			if sub == nil || depth > 3 {
				continue
			}
			_, hasDefault := sub["default"]
			if req[k] || hasDefault || len(asSlice(sub["examples"])) > 0 || sub["x-megane-widget"] != nil {
				obj[k] = sampleValue(bt, sub, depth+1)
			}
		}
		return obj
	}
	return nil
}

// waterMolblock is a 3D water molecule (V2000, explicit H, Å).
var waterMolblock = strings.Join([]string{
	"water",
	fmt.Sprintf("%-20s3D", "  megane"),
	"",
	"  3  2  0  0  0  0  0  0  0  0999 V2000",
	"    0.0000    0.0000    0.1173 O   0  0  0  0  0  0  0  0  0  0  0  0",
	"    0.0000    0.7572   -0.4692 H   0  0  0  0  0  0  0  0  0  0  0  0",
	"    0.0000   -0.7572   -0.4692 H   0  0  0  0  0  0  0  0  0  0  0  0",
	"  1  2  1  0",
	"  1  3  1  0",
	"M  END",
}, "\n") + "\n"

// waterDocument is an open document of one water molecule in a 20 Å box.
func waterDocument() map[string]any {
	return map[string]any{
		"elements":  []any{8, 1, 1},
		"positions": []any{10.0, 10.0, 10.1173, 10.0, 10.7572, 9.5308, 10.0, 9.2428, 9.5308},
		"cell":      []any{20.0, 0.0, 0.0, 0.0, 20.0, 0.0, 0.0, 0.0, 20.0},
		"bonds":     []any{[]any{0, 1}, []any{0, 2}},
	}
}

// nameVersion is how check and doctor name a server after its entry:
// " (name version)", " (name)" when it gives no version (mcp 2.x's
// default), and "" when it gives no name.
func nameVersion(name, version string) string {
	name, version = strings.TrimSpace(name), strings.TrimSpace(version)
	switch {
	case name == "":
		return ""
	case version == "":
		return " (" + name + ")"
	}
	return " (" + name + " " + version + ")"
}
