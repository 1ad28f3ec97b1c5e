package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ModernServerEnv names the environment variable that makes the test
// binary a stdio MCP server speaking only revision 2026-07-28 (TestMain
// calls serveModernFromEnv); its value is a ModernServerMode as JSON. Unlike
// bridgetest's servers it is go-sdk's server, so that the bridge meets a
// real implementation of that revision.
const ModernServerEnv = "BRIDGE_TEST_MODERN_SERVER"

// ModernServerMode says how the modern stdio server behaves.
type ModernServerMode struct {
	// StartDelayMs: the server writes "downloading" to stderr, then sleeps
	// this long before reading stdin, as a server that uvx or npx first
	// downloads does.
	StartDelayMs int `json:"startDelayMs,omitempty"`
	// Journal, when set, is a file to which the method of every message the
	// server receives is appended, one JSON line each ({"method": ...},
	// with "params" for server/discover), and {"method": "cancelled:slow"}
	// when a call of slow ends because it was cancelled.
	Journal string `json:"journal,omitempty"`
}

// NewModernTestServer is go-sdk's server restricted to revision 2026-07-28
// with two tools: hello answers "hello <name>"; slow sends one progress
// notification per step (steps, intervalMs) and answers "slow: <n> steps",
// or ends when its call is cancelled. It refuses initialize as a server of
// only that revision does (the TypeScript SDK's modern-only server, and the
// revision's "name the protocol versions it supports in any error it
// returns to an initialize request"): -32022 with data.supported. go-sdk's
// own server would answer initialize with 2025-11-25. record, if not nil,
// gets every method received (with the params of server/discover) and
// "cancelled:slow".
func NewModernTestServer(record func(method string, params any)) *mcp.Server {
	if record == nil {
		record = func(string, any) {}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "modern", Title: "Modern server", Version: "2.0.0"},
		&mcp.ServerOptions{SupportedProtocolVersions: []string{"2026-07-28"}, Instructions: "Say hello."})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			var params any
			if method == "server/discover" {
				params = req.GetParams()
			}
			record(method, params)
			if method == "initialize" {
				var requested string
				if p, ok := req.GetParams().(*mcp.InitializeParams); ok && p != nil {
					requested = p.ProtocolVersion
				}
				data, _ := json.Marshal(map[string]any{"supported": []string{"2026-07-28"}, "requested": requested})
				return nil, &jsonrpc.Error{Code: mcp.CodeUnsupportedProtocolVersion,
					Message: "Unsupported protocol version: this server speaks 2026-07-28 only", Data: data}
			}
			return next(ctx, method, req)
		}
	})
	s.AddTool(&mcp.Tool{Name: "hello", Description: "Say hello.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Name string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + args.Name}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "slow", Description: "One progress notification per step.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"steps":{"type":"integer"},"intervalMs":{"type":"integer"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Steps      int `json:"steps"`
				IntervalMs int `json:"intervalMs"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			for i := 1; i <= args.Steps; i++ {
				if tok := req.Params.GetProgressToken(); tok != nil {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok,
						Progress: float64(i), Total: float64(args.Steps)})
				}
				select {
				case <-ctx.Done():
					record("cancelled:slow", nil)
					return nil, ctx.Err()
				case <-time.After(time.Duration(args.IntervalMs) * time.Millisecond):
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("slow: %d steps", args.Steps)}}}, nil
		})
	return s
}

// serveModernFromEnv serves the modern server on stdin and stdout when
// ModernServerEnv is set, and reports whether it did.
func serveModernFromEnv() bool {
	spec := os.Getenv(ModernServerEnv)
	if spec == "" {
		return false
	}
	var mode ModernServerMode
	if err := json.Unmarshal([]byte(spec), &mode); err != nil {
		fmt.Fprintf(os.Stderr, "modern server: %s: %v\n", ModernServerEnv, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	var journal *os.File
	if mode.Journal != "" {
		f, err := os.OpenFile(mode.Journal, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintf(os.Stderr, "modern server: %v\n", err)
			os.Exit(2)
		}
		journal = f
		defer f.Close()
	}
	record := func(method string, params any) {
		if journal == nil {
			return
		}
		b, _ := json.Marshal(map[string]any{"method": method, "params": params})
		mu.Lock()
		_, _ = journal.Write(append(b, '\n'))
		mu.Unlock()
	}
	if mode.StartDelayMs > 0 {
		fmt.Fprintln(os.Stderr, "modern server: downloading (simulated)")
		time.Sleep(time.Duration(mode.StartDelayMs) * time.Millisecond)
		fmt.Fprintln(os.Stderr, "modern server: ready")
	}
	if err := NewModernTestServer(record).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintf(os.Stderr, "modern server: %v\n", err)
	}
	return true
}
