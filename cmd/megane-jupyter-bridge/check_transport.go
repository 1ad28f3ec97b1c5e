package main

// The one place check builds a stdio transport and touches the stdio
// transport's process API (Pgid, Pid): the stdio transport is moving to its
// own packages, and this file is what changes with it.

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// processTree names a stdio server's processes: the process group the
// transport started it in (the keeper's pid) and the server's own pid.
// *bridge.StdioTransport has both methods.
type processTree interface {
	Pgid() int
	Pid() int
}

// checkTransport is entryTransport with the stdio transport's log going to
// noise, so that check can count what the server wrote to stdout besides
// MCP (§6). tree is nil for a Streamable HTTP server.
func checkTransport(cfg *jupyter.Config, e jupyter.Entry, noise *stdoutNoise) (transport mcp.Transport, stdio *bridge.StdioTransport, tree processTree) {
	if e.Transport != jupyter.TransportStdio {
		transport, _ = entryTransport(cfg, e)
		return transport, nil, nil
	}
	env := cfg.Admin.FilterEnv(os.Environ())
	for _, k := range names(e.Env) {
		env = append(env, k+"="+e.Env[k])
	}
	stdio = bridge.NewStdioTransport(bridge.StdioOptions{Name: e.Name, Command: e.Command, Args: e.Args,
		Env: env, Dir: e.Cwd, TerminateDuration: time.Second, KillDuration: 2 * time.Second,
		Logger: slog.New(noise)})
	return stdio, stdio, stdio
}

// stdoutNoise is a slog.Handler for the stdio transport's log that counts
// the stdout lines it skipped or dropped (the transport logs each at Warn
// or Error, with the line's start in the "line" attribute when it has one).
type stdoutNoise struct {
	mu    sync.Mutex
	n     int    // guarded by mu
	first string // guarded by mu: the first skipped line, if logged
}

func (s *stdoutNoise) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (s *stdoutNoise) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, "skipping") && !strings.HasPrefix(r.Message, "dropping") {
		return nil
	}
	line := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "line" {
			line = a.Value.String()
			return false
		}
		return true
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if s.first == "" {
		s.first = line
	}
	return nil
}

func (s *stdoutNoise) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s *stdoutNoise) WithGroup(string) slog.Handler      { return s }

// count returns how many lines were skipped and the first one.
func (s *stdoutNoise) count() (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.first
}
