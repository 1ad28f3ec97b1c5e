package bridge

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Revision 2026-07-28 starts with server/discover. A server of an earlier
// revision should refuse it (method not found) and go-sdk then falls back
// to initialize; but some servers ignore unknown methods, and go-sdk would
// wait for the answer until InitTimeout. The bridge bounds that wait
// (Options.DiscoverTimeout) by answering server/discover itself, as refused,
// when the server has not, and remembers per server definition which
// revision the server agreed to, so that the next start offers it at once.

const methodDiscover = "server/discover"

// discoverBound is a stdio connection whose server/discover is answered
// "method not found" by the bridge after a bound, unless the server answers
// first; the server's late answer is then dropped.
type discoverBound struct {
	mcp.Connection
	after time.Duration

	start   sync.Once
	msgs    chan readResult // from the pump
	stop    chan struct{}   // closed by Close: the pump gives up sending
	stopped sync.Once
	inject  chan jsonrpc.Message // buffered(1): the synthesized refusal

	mu       sync.Mutex
	id       jsonrpc.ID  // guarded by mu; the pending server/discover
	pending  bool        // guarded by mu
	injected bool        // guarded by mu; the refusal was synthesized: drop the server's answer
	timer    *time.Timer // guarded by mu
}

type readResult struct {
	msg jsonrpc.Message
	err error
}

func newDiscoverBound(c mcp.Connection, after time.Duration) *discoverBound {
	return &discoverBound{Connection: c, after: after, msgs: make(chan readResult), stop: make(chan struct{}),
		inject: make(chan jsonrpc.Message, 1)}
}

func (d *discoverBound) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == methodDiscover && req.IsCall() {
		d.mu.Lock()
		d.id, d.pending, d.injected = req.ID, true, false
		if d.timer != nil {
			d.timer.Stop()
		}
		id := req.ID
		d.timer = time.AfterFunc(d.after, func() { d.expire(id) })
		d.mu.Unlock()
	}
	return d.Connection.Write(ctx, msg)
}

func (d *discoverBound) expire(id jsonrpc.ID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.pending || d.id != id {
		return
	}
	d.pending, d.injected = false, true
	resp := &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: -32601,
		Message: fmt.Sprintf("server/discover was not answered within %s", d.after)}}
	select {
	case d.inject <- resp:
	default:
	}
}

// pump reads the inner connection until it fails.
func (d *discoverBound) pump() {
	for {
		msg, err := d.Connection.Read(context.Background())
		select {
		case d.msgs <- readResult{msg, err}:
		case <-d.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

func (d *discoverBound) Read(ctx context.Context) (jsonrpc.Message, error) {
	d.start.Do(func() { go d.pump() })
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-d.stop:
			return nil, io.EOF // closed: what the inner connection reports
		case m := <-d.inject:
			return m, nil
		case r := <-d.msgs:
			if r.err != nil {
				return nil, r.err
			}
			if resp, ok := r.msg.(*jsonrpc.Response); ok && d.answers(resp.ID) {
				continue // the bridge already answered it as refused
			}
			return r.msg, nil
		}
	}
}

// answers reports whether a response with id must be dropped, and settles
// the pending server/discover it answers.
func (d *discoverBound) answers(id jsonrpc.ID) (drop bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.id != id {
		return false
	}
	if d.pending {
		d.pending = false
		d.timer.Stop()
		return false
	}
	if d.injected {
		d.injected = false
		return true
	}
	return false
}

func (d *discoverBound) Close() error {
	d.stopped.Do(func() { close(d.stop) })
	d.mu.Lock()
	if d.timer != nil {
		d.timer.Stop()
	}
	d.mu.Unlock()
	return d.Connection.Close()
}

// discoverBoundTransport wraps a stdio transport's connections.
type discoverBoundTransport struct {
	inner mcp.Transport
	after time.Duration
}

func (t discoverBoundTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil || c == nil {
		return c, err
	}
	return newDiscoverBound(c, t.after), nil
}

// offeredVersion is the revision to offer a server: Options.ProtocolVersion,
// or the older one the server agreed to last time.
func (b *Bridge) offeredVersion(key string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if v := b.spoken[key]; v != "" && v < b.opts.ProtocolVersion {
		return v
	}
	return b.opts.ProtocolVersion
}

func (b *Bridge) rememberVersion(key, version string) {
	if version == "" {
		return
	}
	b.mu.Lock()
	b.spoken[key] = version
	b.mu.Unlock()
}
