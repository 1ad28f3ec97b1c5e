package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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
	fs.SetOutput(stderr)
	var cf configFlags
	cf.register(fs)
	asJSON := fs.Bool("json", false, "print the findings as a JSON array")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long starting a server, and each call, may take")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	var entries []jupyter.Entry
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
		entries = []jupyter.Entry{{Name: filepath.Base(rest[0]), Transport: jupyter.TransportStdio, Command: cmd, Args: rest[1:]}}
		cfg = &jupyter.Config{}
	case len(rest) == 1 && (strings.HasPrefix(rest[0], "http://") || strings.HasPrefix(rest[0], "https://")):
		entries = []jupyter.Entry{{Name: rest[0], Transport: jupyter.TransportHTTP, URL: rest[0]}}
		cfg = &jupyter.Config{}
	default:
		var err error
		if cfg, err = cf.load(ctx); err != nil {
			return err
		}
		for _, name := range rest {
			found := false
			for _, e := range cfg.Entries {
				if e.Name == name {
					entries, found = append(entries, e), true
				}
			}
			if !found {
				return usageError{fmt.Sprintf("check: no configured server %q (megane-jupyter-bridge servers lists them)", name)}
			}
		}
		if len(rest) == 0 {
			entries = cfg.Entries
		}
	}
	var all []finding
	for _, e := range entries {
		got := checkServer(ctx, cfg, e, *timeout)
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
		return fmt.Errorf("check: %d finding(s) fail the Builder Tool Contract", fails)
	}
	return nil
}

// argsHaveDash reports whether the arguments after the flags came after a
// "--" (a command to start rather than server names).
func argsHaveDash(args, rest []string) bool {
	i := len(args) - len(rest) - 1
	return i >= 0 && args[i] == "--"
}

// checkServer connects to e as the bridge would and checks every tool.
func checkServer(ctx context.Context, cfg *jupyter.Config, e jupyter.Entry, timeout time.Duration) []finding {
	server := &findings{server: e.Name}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	transport, stdio := entryTransport(cfg, e)
	client := mcp.NewClient(&mcp.Implementation{Name: "megane-jupyter-bridge-check", Version: version}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := client.Connect(cctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		msg := fmt.Sprintf("server %s did not start: %v", e.Name, err)
		server.add("fail", "§8", "%s", msg+stderrHint(stdio, msg))
		return server.list
	}
	defer cs.Close()
	var tools []*mcp.Tool
	for cursor := ""; ; {
		res, err := cs.ListTools(cctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			server.add("fail", "§3", "tools/list failed: %v", err)
			return server.list
		}
		tools = append(tools, res.Tools...)
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
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
		if bt.Input != nil && !hasFail(defs, "§4") {
			callChecks(ctx, cs, fs, bt, timeout)
		}
		if !hasFail(defs, "") && !hasFail(fs.list, "") {
			fs.add("ok", "", "keeps the contract (%s, %s)", bt.Apply, strings.TrimPrefix(jsonText(bt.Meta["category"]), ""))
		}
		out = append(out, fs.list...)
	}
	info := ""
	if ir := cs.InitializeResult(); ir != nil && ir.ServerInfo != nil {
		info = fmt.Sprintf(" (%s %s)", ir.ServerInfo.Name, ir.ServerInfo.Version)
	}
	level := "ok"
	if builder == 0 {
		level = "warn"
	}
	server.add(level, "§3", "server %s%s: %d tools, %d of them Builder tools", e.Name, info, len(tools), builder)
	return append(server.list, out...)
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

// callChecks calls bt with sample arguments and checks the result (§5),
// the same seed again (§4.4), and a call without its required arguments
// (§6).
func callChecks(ctx context.Context, cs *mcp.ClientSession, fs *findings, bt *builderTool, timeout time.Duration) {
	call := func(args map[string]any) (*mcp.CallToolResult, json.RawMessage, time.Duration, error) {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		start := time.Now()
		res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: bt.Name, Arguments: args})
		took := time.Since(start)
		if err != nil {
			return nil, nil, took, err
		}
		raw, _ := json.Marshal(res)
		return res, raw, took, nil
	}
	args := sampleArgs(bt, 7)
	res, raw, took, err := call(args)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		fs.add("fail", "§6", "the call with sample arguments did not finish within %s", timeout)
		return
	case err != nil:
		fs.add("fail", "§6", "the call with sample arguments failed: %v", err)
		return
	case res.IsError:
		fs.add("fail", "§5", "the call with sample arguments %s returned a tool error: %s", jsonText(args), firstText(res))
		return
	}
	doc, _ := args[bt.DocProp].(map[string]any)
	structure := checkResult(fs, bt, raw, doc)
	if exp, ok := bt.Meta["expectedSeconds"].(float64); ok && took.Seconds() > max(60, 5*exp) {
		fs.add("warn", "§6", "the call took %s, over the Builder's timeout of max(60 s, 5 × expectedSeconds)", took.Round(time.Millisecond))
	}
	if bt.Stochastic && bt.SeedProp != "" && structure != nil {
		_, raw2, _, err := call(args)
		var again struct {
			StructuredContent struct {
				Structure json.RawMessage `json:"structure"`
			} `json:"structuredContent"`
		}
		if err == nil && json.Unmarshal(raw2, &again) == nil && string(again.StructuredContent.Structure) != string(structure) {
			fs.add("fail", "§4.4", "the same arguments and seed gave another structure")
		}
	}
	if len(bt.requiredSet) > 0 {
		res, _, _, err := call(map[string]any{})
		switch {
		case err != nil:
			fs.add("warn", "§6", "a call without its required arguments got a JSON-RPC error, not a tool error (Builder shows \"The server failed\"): %v", err)
		case !res.IsError:
			fs.add("fail", "§6", "a call without its required arguments succeeded")
		case strings.Contains(strings.TrimSpace(firstText(res)), "\n"):
			fs.add("warn", "§6", "the tool error for a call without its required arguments is not one line")
		}
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
