// Package demotools owns the demo Builder tool server behind
// "megane-jupyter-bridge demo-tools": a real MCP server (go-sdk) over stdio
// that implements Builder Tool Contract v1 with two tools, gas_box
// (stochastic) and crystal (deterministic), so that the bridge can be tried
// and tested end to end without Python.
//
// It never reads files, never opens network connections, never writes
// anything but MCP messages to its output (logs go to the separate log
// writer), and holds no state between calls.
package demotools

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServerName is the serverInfo name of the demo server, and the provenance
// key that records its version in every result.
const ServerName = "megane-jupyter-bridge demo-tools"

// DefaultVersion is the version Run reports when Options.Version is empty.
const DefaultVersion = "0.1.0"

// Options configures RunWithOptions.
type Options struct {
	// Version is reported in serverInfo and in every result's provenance.
	// If empty, DefaultVersion.
	Version string
	// Logger receives one record per call outcome (key "tool", "outcome").
	// If nil, logs are discarded.
	Logger *slog.Logger
}

// Run serves the demo tools as an MCP server over newline-delimited JSON-RPC,
// reading requests from in and writing messages to out, until in reaches
// end of file or ctx is cancelled. Logs (text, one line per record) go to
// logw, which may be nil. If in is an io.Closer, Run closes it when it
// returns, so that its reader goroutine ends.
func Run(ctx context.Context, in io.Reader, out io.Writer, logw io.Writer) error {
	var logger *slog.Logger
	if logw != nil {
		logger = slog.New(slog.NewTextHandler(logw, nil))
	}
	return RunWithOptions(ctx, in, out, Options{Logger: logger})
}

// RunWithOptions is Run with explicit options.
func RunWithOptions(ctx context.Context, in io.Reader, out io.Writer, opts Options) error {
	srv := NewServer(opts)
	err := srv.Run(ctx, &mcp.IOTransport{Reader: readCloser{in}, Writer: nopWriteCloser{out}})
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// NewServer returns the go-sdk server with both tools registered, for
// callers that want another transport (tests use in-memory transports).
func NewServer(opts Options) *mcp.Server {
	if opts.Version == "" {
		opts.Version = DefaultVersion
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: opts.Version}, &mcp.ServerOptions{
		// Only the tools capability: no logging, prompts or resources.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	t := &tools{version: opts.Version, log: opts.Logger}
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: new(false), OpenWorldHint: new(false)}
	mcp.AddTool(srv, &mcp.Tool{
		Name:  "gas_box",
		Title: "Gas box",
		Description: "Fill a cubic periodic box with atoms of one element at random positions. " +
			"The box is sized from the density (g/cm³) unless a box length is given; with a minimum distance, " +
			"positions closer than that to an earlier atom (across periodic boundaries) are drawn again. " +
			"The same seed gives the same box. The result has no bonds (an atomic gas has no connectivity).",
		InputSchema:  json.RawMessage(gasBoxInputSchema),
		OutputSchema: json.RawMessage(builderResultSchema),
		Annotations:  readOnly,
		Meta: mcp.Meta{builderMetaKey: map[string]any{
			"contract": 1, "category": "bulk", "apply": "new_document", "document": "none",
			"stochastic": true, "expectedSeconds": 2,
		}},
	}, t.gasBox)
	mcp.AddTool(srv, &mcp.Tool{
		Name:  "crystal",
		Title: "Crystal",
		Description: "Build a supercell of a simple, body-centred or face-centred cubic crystal of one element. " +
			"Give the lattice constant of the conventional cubic cell and how many cells to repeat along each axis; " +
			"the result's cell is the supercell. It has no bonds: the atoms of a metallic or atomic crystal have no connectivity to assert.",
		InputSchema:  json.RawMessage(crystalInputSchema),
		OutputSchema: json.RawMessage(builderResultSchema),
		Annotations:  readOnly,
		Meta: mcp.Meta{builderMetaKey: map[string]any{
			"contract": 1, "category": "bulk", "apply": "new_document", "document": "none",
			"stochastic": false, "expectedSeconds": 1,
		}},
	}, t.crystal)
	return srv
}

// readCloser adapts the input reader to go-sdk's io.ReadCloser; Close closes
// the underlying reader when it can be closed.
type readCloser struct{ io.Reader }

func (r readCloser) Close() error {
	if c, ok := r.Reader.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// nopWriteCloser adapts the output writer; the caller owns closing it.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
