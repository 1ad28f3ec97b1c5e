package main

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/child"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
	"github.com/megane-labs/megane-jupyter-bridge/stdio"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// processTree names a stdio server's processes: its group
// (child.Process.Group) and the server's own pid. *stdio.Transport has
// both methods.
type processTree interface {
	Pgid() int
	Pid() int
}

// treeCPU returns the CPU time (user + system) each process of the
// server's tree has used so far (child.Tree: its group, and every
// descendant of the group leader or of the server).
func treeCPU(tree processTree) (map[int]time.Duration, error) {
	if !child.CPUMeasured() {
		return nil, errCPUNotMeasured
	}
	out := map[int]time.Duration{}
	for _, p := range child.Tree(tree.Pgid(), tree.Pid()) {
		out[p.PID] = p.CPU
	}
	return out, nil
}

// checkTransport is entryTransport with the stdio transport's log going to
// noise, so that check can count what the server wrote to stdout besides
// MCP (§6). pipes and tree are nil for a Streamable HTTP server.
func checkTransport(cfg *jupyter.Config, e bridge.ServerSpec, noise *stdoutNoise) (transport mcp.Transport, pipes *stdio.Transport, tree processTree) {
	transport, pipes, _ = entryTransport(cfg, e, slog.New(noise))
	if pipes == nil {
		return transport, nil, nil
	}
	return transport, pipes, pipes
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
