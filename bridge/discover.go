package bridge

import (
	"context"
	"encoding/json"
	"errors"
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
// when the server has not (over stdio discoverBound, over Streamable HTTP
// tapRoundTripper.boundedDiscover), and remembers per server definition
// which revision the server agreed to, so that the next start offers it at
// once.
//
// The bound starts when server/discover is written, but the server may not
// answer it for a long while: a stdio server that uvx or npx downloads on
// its first start, a Streamable HTTP server that starts cold (a serverless
// or autoscaled lab service). A server of 2026-07-28 only that is that
// slow answers server/discover late and then refuses the fallback
// initialize. The revision says how to tell it from an older server
// (versioning, "Backward Compatibility"): a recognized modern error
// (UnsupportedProtocolVersionError naming the versions it speaks, which a
// modern-only server should return to initialize) identifies a modern
// server, and a client re-probes when its cached assumption about a
// server's era fails. So when the bound cut server/discover short and then
// the server answered it after all, or refused initialize with such an
// error, the bridge starts the server again (go-sdk has closed the
// connection) and this time waits for server/discover as long as
// InitTimeout allows: a server definition known to speak 2026-07-28 gets
// no shorter bound. If such a start fails, the bridge forgets what it knew,
// and the next start probes with the bound again. One rule decides this for
// both transports (connectFailed, on the start's discoverProbe). Over stdio
// the late answer arrives on the connection and is dropped; over HTTP the
// request is not cancelled at the bound but left to go on until the start
// ends, so that its answer is seen if it comes by then. (Starting the bound
// at the server's first sign of life instead would not do: an older stdio
// server that ignores server/discover writes nothing to stdout before it is
// initialized, stderr says nothing reliable about readiness, and an HTTP
// server's first sign of life is its answer.)

const methodDiscover = "server/discover"

// discoverProbe is what one start learned about its server/discover: the
// bound that applies (after; <= 0: none, InitTimeout bounds it), whether
// the bound cut a server/discover short, and whether the server answered
// it after all with a result. One rule reads it for both transports
// (connectFailed): the stdio connection (discoverBound) and the Streamable
// HTTP round tripper (tapRoundTripper.boundedDiscover) record into it.
type discoverProbe struct {
	after time.Duration
	known bool // the server definition was known to speak 2026-07-28: no bound

	mu   sync.Mutex
	cut  bool // guarded by mu; the bound answered a server/discover
	late bool // guarded by mu; then the server answered it after all, with a result
}

// bounded reports whether server/discover is bounded at all.
func (p *discoverProbe) bounded() bool { return p != nil && p.after > 0 }

func (p *discoverProbe) markCut() {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
}

func (p *discoverProbe) markLate() {
	p.mu.Lock()
	p.late = true
	p.mu.Unlock()
}

// answeredLate reports whether the bound answered a server/discover and
// whether the server then answered it with a result: it speaks 2026-07-28
// but was slow to start.
func (p *discoverProbe) answeredLate() (cut, late bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut, p.late
}

// discoverBound is a stdio connection whose server/discover is answered
// "method not found" by the bridge after a bound, unless the server answers
// first; the server's late answer is then dropped (and recorded in probe).
type discoverBound struct {
	mcp.Connection
	probe *discoverProbe

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

func newDiscoverBound(c mcp.Connection, probe *discoverProbe) *discoverBound {
	return &discoverBound{Connection: c, probe: probe, msgs: make(chan readResult), stop: make(chan struct{}),
		inject: make(chan jsonrpc.Message, 1)}
}

func (d *discoverBound) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == methodDiscover && req.IsCall() && d.probe.bounded() {
		d.mu.Lock()
		d.id, d.pending, d.injected = req.ID, true, false
		if d.timer != nil {
			d.timer.Stop()
		}
		id := req.ID
		d.timer = time.AfterFunc(d.probe.after, func() { d.expire(id) })
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
	d.probe.markCut()
	resp := &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: -32601,
		Message: fmt.Sprintf("server/discover was not answered within %s", d.probe.after)}}
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
			if resp, ok := r.msg.(*jsonrpc.Response); ok && d.answers(resp.ID, resp.Error == nil) {
				continue // the bridge already answered it as refused
			}
			return r.msg, nil
		}
	}
}

// answers reports whether a response with id must be dropped, and settles
// the pending server/discover it answers; result says the response is a
// result, not an error.
func (d *discoverBound) answers(id jsonrpc.ID, result bool) (drop bool) {
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
		if result {
			d.probe.markLate()
		}
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

// discoverBoundTransport wraps a stdio transport's connections in
// discoverBound; a probe that is not bounded leaves server/discover
// unbounded (InitTimeout bounds it).
type discoverBoundTransport struct {
	inner mcp.Transport
	probe *discoverProbe
}

func (t *discoverBoundTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil || c == nil {
		return c, err
	}
	return newDiscoverBound(c, t.probe), nil
}

// errModernAfterBound marks a start to be made again: the server speaks
// 2026-07-28 only, and the bound on server/discover made it look older.
var errModernAfterBound = errors.New("the server speaks 2026-07-28 only and answered server/discover after the bound")

// connectFailed looks at a failed start (its probe, of either transport;
// err from go-sdk's Connect) and returns the error to report. A server
// definition that was known to speak 2026-07-28 is forgotten, so that the
// next start probes again. If the bound cut server/discover short and the
// server has since shown that it speaks 2026-07-28 only (it answered
// server/discover late, or refused initialize naming 2026-07-28), it is
// remembered as such and the error wraps errModernAfterBound.
func (s *session) connectFailed(p *discoverProbe, err error) error {
	s.b.forgetModern(s.key)
	if p == nil {
		return err
	}
	if p.known && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("did not answer server/discover within %s (it spoke 2026-07-28 when last started; "+
			"the next start probes for an older revision again)", s.b.opts.InitTimeout)
	}
	cut, late := p.answeredLate()
	if !cut || !(late || refusedAsModern(err)) {
		return err
	}
	s.b.rememberVersion(s.key, protocolVersion20260728)
	return fmt.Errorf("%w (after %s): %v", errModernAfterBound, p.after, err)
}

// refusedAsModern reports whether err is a recognized modern refusal:
// UnsupportedProtocolVersionError (-32022) whose supported versions
// include 2026-07-28 or later.
func refusedAsModern(err error) bool {
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != mcp.CodeUnsupportedProtocolVersion {
		return false
	}
	var data struct {
		Supported []string `json:"supported"`
	}
	if json.Unmarshal(werr.Data, &data) != nil {
		return false
	}
	for _, v := range data.Supported {
		if v >= protocolVersion20260728 {
			return true
		}
	}
	return false
}

const protocolVersion20260728 = "2026-07-28"

// start starts the server (startOnce), and once more when the first start
// found a server of 2026-07-28 only that was slow to answer
// server/discover (see the top of this file).
func (s *session) start(ctx context.Context) (*startedConn, error) {
	conn, err := s.startOnce(ctx)
	if err == nil || !errors.Is(err, errModernAfterBound) {
		return conn, err
	}
	s.b.log.Info("server answered server/discover after the bound and refused the fallback initialize: "+
		"it speaks 2026-07-28 only; starting it again, waiting up to InitTimeout for server/discover",
		"server", s.spec.Name, "error", err.Error())
	if conn != nil {
		conn.close()
	}
	return s.startOnce(ctx)
}

// newProbe returns the probe of one start of a server definition: no
// bound on server/discover (InitTimeout) when it is known to speak
// 2026-07-28, else Options.DiscoverTimeout.
func (b *Bridge) newProbe(key string) *discoverProbe {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spoken[key] >= protocolVersion20260728 {
		return &discoverProbe{known: true}
	}
	return &discoverProbe{after: b.opts.DiscoverTimeout}
}

// forgetModern forgets that a server definition speaks 2026-07-28 (after a
// failed start): the next start probes with the bound again.
func (b *Bridge) forgetModern(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spoken[key] >= protocolVersion20260728 {
		delete(b.spoken, key)
	}
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
