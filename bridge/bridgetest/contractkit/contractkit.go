// Package contractkit is the part of the fake server kit (bridgetest) that
// breaks the Builder Tool Contract rather than the protocol: a Builder tool
// server built to break one rule of the contract at a time, for the tests of
// `megane-jupyter-bridge check`. A test binary serves it when started with
// EnvVar set (see ServeFromEnv), with the tool definition, the result and
// the misbehaviour the test chose. With an empty Spec it keeps every rule.
//
// Unlike bridgetest's Serve it is built on the go-sdk's server: its faults
// are in what a well-formed server says (schemas, results, cancellation,
// timing), so the protocol is left to the SDK, and bridgetest itself keeps
// every byte it writes under its own control and never imports it. It is
// never part of the bridge's binary and never reads anything but its Spec.
package contractkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EnvVar holds the JSON Spec of the server a re-executed test binary serves.
const EnvVar = "MEGANE_CONTRACTKIT_SERVER"

// burnEnv makes a re-executed test binary use one CPU for the duration it
// holds (a Go duration) and exit: the external program of a tool.
const burnEnv = "MEGANE_CONTRACTKIT_BURN"

// Faults: what the server does wrong, one rule each.
const (
	// BusyAfterCancel: the call's work is a CPU loop that ignores
	// cancellation (§6).
	BusyAfterCancel = "busy-after-cancel"
	// ChildAfterCancel: the work runs in a child process that the handler
	// leaves running when the call is cancelled (§6).
	ChildAfterCancel = "child-after-cancel"
	// StdoutNoise: a line that is not MCP on stdout at start and in every
	// call (§6).
	StdoutNoise = "stdout-noise"
	// IgnoreSeed: positions differ from call to call whatever the seed
	// (§4.4).
	IgnoreSeed = "ignore-seed"
	// AcceptMissing: a call without its required arguments succeeds (§6).
	AcceptMissing = "accept-missing"
	// ProtocolErrorMissing: a call without its required arguments gets a
	// JSON-RPC error, not a tool error (§6).
	ProtocolErrorMissing = "protocol-error-missing"
	// MultilineMissing: the tool error for missing arguments has two lines
	// (§6).
	MultilineMissing = "multiline-missing"
	// EchoDocument: the result's structure is the document argument (an
	// insert tool repeating the document, §5.2).
	EchoDocument = "echo-document"
)

// Spec is the server a test asks for.
type Spec struct {
	// Tool is the tool definition served. If empty, ValidTool.
	Tool json.RawMessage `json:"tool,omitempty"`
	// Result is the structuredContent returned as is. If empty, a valid
	// BuilderResult built from the arguments.
	Result json.RawMessage `json:"result,omitempty"`
	// NoSummary leaves the text summary out of content.
	NoSummary bool `json:"noSummary,omitempty"`
	// Fault is one of the fault constants, or "".
	Fault string `json:"fault,omitempty"`
	// WorkMs is how long a call works: asleep and honouring cancellation,
	// unless Fault says otherwise.
	WorkMs int `json:"workMs,omitempty"`
	// Progress sends a progress notification every 100 ms of work.
	Progress bool `json:"progress,omitempty"`
}

// Env returns the environment entry that makes a re-executed test binary
// serve s.
func (s Spec) Env() string {
	b, err := json.Marshal(s)
	if err != nil { // Spec holds only marshalable fields
		panic(err)
	}
	return EnvVar + "=" + string(b)
}

// ValidTool keeps every rule of §3 and §4: a stochastic new_document tool
// with a count, a spacing and a seed.
const ValidTool = `{
  "name": "cluster", "title": "Cluster", "description": "Put argon atoms on a line. For tests of the checker.",
  "icons": [{"src": "data:image/svg+xml;base64,PHN2Zy8+", "mimeType": "image/svg+xml"}],
  "inputSchema": {"type": "object",
    "properties": {
      "count": {"type": "integer", "minimum": 1, "maximum": 1000, "examples": [3], "x-megane-unit": "count"},
      "spacing": {"type": "number", "exclusiveMinimum": 0, "default": 3.0, "x-megane-unit": "angstrom"},
      "seed": {"type": "integer", "minimum": 0, "x-megane-widget": "seed"}
    },
    "required": ["count", "seed"]},
  "outputSchema": {"type": "object", "required": ["contract", "structure"],
    "properties": {"contract": {"type": "integer"}, "name": {"type": "string"},
      "structure": {"type": "object", "required": ["elements", "positions", "cell", "bonds"]},
      "warnings": {"type": "array", "items": {"type": "string"}}, "provenance": {"type": "object"}}},
  "_meta": {"io.github.megane-labs/builder": {"contract": 1, "category": "bulk", "apply": "new_document", "document": "none", "stochastic": true, "expectedSeconds": 1}}
}`

// ServeFromEnv serves the Spec in EnvVar on stdin and stdout, or burns CPU
// when burnEnv is set, and exits; it returns when neither is set.
func ServeFromEnv() {
	if d, err := time.ParseDuration(os.Getenv(burnEnv)); err == nil {
		burn(context.Background(), d)
		os.Exit(0)
	}
	raw, ok := os.LookupEnv(EnvVar)
	if !ok {
		return
	}
	var spec Spec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "contractkit:", err)
		os.Exit(1)
	}
	if err := Serve(context.Background(), os.Stdin, os.Stdout, spec); err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintln(os.Stderr, "contractkit:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Serve serves spec over newline-delimited JSON-RPC until in ends.
func Serve(ctx context.Context, in io.ReadCloser, out io.Writer, spec Spec) error {
	w := &lockedWriter{w: out}
	if spec.Fault == StdoutNoise {
		w.Write([]byte("Loading RDKit...\n"))
	}
	srv, err := NewServer(spec, w)
	if err != nil {
		return err
	}
	return srv.Run(ctx, &mcp.IOTransport{Reader: in, Writer: w})
}

// NewServer returns the go-sdk server for spec, for other transports
// (Streamable HTTP); StdoutNoise writes to noise.
func NewServer(spec Spec, noise io.Writer) (*mcp.Server, error) {
	def := spec.Tool
	if len(def) == 0 {
		def = json.RawMessage(ValidTool)
	}
	var tool mcp.Tool
	if err := json.Unmarshal(def, &tool); err != nil {
		return nil, fmt.Errorf("decode the tool definition: %w", err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "contractkit", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	srv.AddTool(&tool, (&server{spec: spec, out: noise}).call)
	return srv, nil
}

// lockedWriter keeps the noise lines of StdoutNoise whole between messages.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil }

type server struct {
	spec Spec
	out  io.Writer
}

// call is the tool: check the arguments, work, answer.
func (s *server) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args map[string]any
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return toolError("The arguments are not a JSON object."), nil
	}
	if s.spec.Fault == StdoutNoise {
		s.out.Write([]byte("step 1 of 1\n"))
	}
	if _, ok := args["count"]; !ok && s.spec.Fault != AcceptMissing {
		switch s.spec.Fault {
		case ProtocolErrorMissing:
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "count is required"}
		case MultilineMissing:
			return toolError("Traceback (most recent call last):\nKeyError: 'count'"), nil
		}
		return toolError("count is required: give the number of atoms."), nil
	}
	if err := s.work(ctx, req); err != nil {
		return nil, err
	}
	sc := s.spec.Result
	if len(sc) == 0 {
		sc = s.result(args)
	}
	res := &mcp.CallToolResult{StructuredContent: sc}
	if !s.spec.NoSummary {
		res.Content = []mcp.Content{&mcp.TextContent{Text: "Put argon atoms on a line."}}
	}
	return res, nil
}

// work takes WorkMs the way Fault says.
func (s *server) work(ctx context.Context, req *mcp.CallToolRequest) error {
	d := time.Duration(s.spec.WorkMs) * time.Millisecond
	switch s.spec.Fault {
	case BusyAfterCancel:
		burn(context.Background(), d)
		return ctx.Err()
	case ChildAfterCancel:
		return s.child(ctx, d)
	}
	token := req.Params.GetProgressToken()
	for start := time.Now(); time.Since(start) < d; {
		if s.spec.Progress && token != nil {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token,
				Progress: float64(time.Since(start).Milliseconds()), Total: float64(s.spec.WorkMs), Message: "working"})
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// child runs the work in a child process and, on cancellation, returns
// without stopping it.
func (s *server) child(ctx context.Context, d time.Duration) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), burnEnv+"="+d.String())
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-done:
		return err
	}
}

// result is a valid BuilderResult: count argon atoms on a line.
func (s *server) result(args map[string]any) json.RawMessage {
	if s.spec.Fault == EchoDocument {
		b, _ := json.Marshal(map[string]any{"contract": 1, "name": "echo", "structure": args["document"], "provenance": map[string]any{"contractkit": "1"}})
		return b
	}
	n, _ := args["count"].(float64)
	spacing, ok := args["spacing"].(float64)
	if !ok {
		spacing = 3
	}
	seed, _ := args["seed"].(float64)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	if s.spec.Fault == IgnoreSeed {
		rng = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	}
	elements := make([]int, int(n))
	positions := make([]float64, 0, 3*int(n))
	for i := range elements {
		elements[i] = 18
		positions = append(positions, float64(i)*spacing+rng.Float64()*0.1, 0, 0)
	}
	b, _ := json.Marshal(map[string]any{"contract": 1, "name": "argon-line",
		"structure":  map[string]any{"elements": elements, "positions": positions, "cell": nil, "bonds": []any{}},
		"warnings":   []string{},
		"provenance": map[string]any{"contractkit": "1", "seed": seed}})
	return b
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// burn uses one CPU for d.
func burn(ctx context.Context, d time.Duration) {
	x := 0
	for end := time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; {
		for i := range 100000 {
			x += i
		}
	}
	_ = strconv.Itoa(x)
}
