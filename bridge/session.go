package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/megane-labs/megane-jupyter-bridge/child"
	"github.com/megane-labs/megane-jupyter-bridge/stdio"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Session states, reported by tools:servers.
const (
	stateStopped   = "stopped"
	stateStarting  = "starting"
	stateConnected = "connected"
	stateFailed    = "failed"
)

// session is one MCP session with one server definition (name and
// fingerprint), shared by every tab that connected it. It is created by
// pool.acquire and ended by stop or by the server.
type session struct {
	b      *Bridge
	spec   ServerSpec
	key    string
	tap    *tap        // set by newSession; hands this server's progress to routeProgress
	auth   AuthWatch   // an HTTP server's 401 and 403
	resume resumeWatch // an HTTP server's resumed event streams

	ready chan struct{} // closed by run when the start finished (ok or not)
	done  chan struct{} // closed by run when the session has ended and its process is gone

	// Set by run before ready is closed; read-only afterwards.
	startErr        error
	cs              *mcp.ClientSession
	serverInfo      json.RawMessage // initialize's serverInfo object, raw
	instructions    json.RawMessage // initialize's instructions string, raw; nil if absent
	protocolVersion string

	stopOnce sync.Once
	cancel   context.CancelFunc // stops run; set at creation

	heardAt atomic.Int64 // unix nanoseconds when the server last sent anything (liveness)
	// cancelled: buffered(1): a call was cancelled; read by watchCancels.
	cancelled chan struct{}
	// busyAfterCancel: unix nanoseconds of the cancel since which the
	// server has been measured busy, 0 when it is not; written by
	// watchCancels (aftercancel.go).
	busyAfterCancel atomic.Int64
	gone            chan string   // buffered(1): why the server is gone (liveness); read by run
	told            chan struct{} // closed by run once the session ended and its tabs were told

	mu       sync.Mutex
	listing  *listing                  // guarded by mu; nil until started
	watchers map[int]func(line string) // guarded by mu; connects waiting for the start
	calls    map[string]*call          // guarded by mu; by progress token: the only calls this server's progress can reach
	stderr   []string                  // guarded by mu; the latest stderr lines (bounded)
	excluded map[string]string         // guarded by mu; tools go-sdk excluded from the listing page being read, with why
	nextW    int                       // guarded by mu
	ended    bool                      // guarded by mu; no more calls accepted
	endedBy  string                    // guarded by mu; why a session that ended on its own ended
	relist   chan struct{}             // buffered(1): list_changed signals; owned by run
	holders  map[*tab]int              // guarded by b.pool.mu, not s.mu
	refs     int                       // guarded by b.pool.mu
	stopping bool                      // guarded by b.pool.mu; stop was requested: acquire starts a new session
	grace    *time.Timer               // guarded by b.pool.mu
}

// listing is a server's tools/list, every page, kept raw.
type listing struct {
	raw     []byte              // the JSON array of tools exactly as sent, less dropped ones
	tools   map[string]toolInfo // by name
	dropped []byte              // JSON array of {name, reason}: tools left out; nil if none
}

type toolInfo struct {
	expectedSeconds float64
}

func newSession(b *Bridge, spec ServerSpec) *session {
	s := &session{
		b:         b,
		spec:      spec,
		key:       sessionKey(spec),
		ready:     make(chan struct{}),
		done:      make(chan struct{}),
		watchers:  map[int]func(string){},
		calls:     map[string]*call{},
		holders:   map[*tab]int{},
		relist:    make(chan struct{}, 1),
		gone:      make(chan string, 1),
		cancelled: make(chan struct{}, 1),
		told:      make(chan struct{}),
	}
	s.markHeard()
	s.tap = newTap(s.routeProgress)
	s.tap.pool = b.results
	return s
}

// state reports the session's state for tools:servers.
func (s *session) state() string {
	select {
	case <-s.ready:
	default:
		return stateStarting
	}
	if s.startErr != nil {
		return stateFailed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.endedBy != "" {
		return stateFailed
	}
	if s.ended {
		return stateStopped
	}
	return stateConnected
}

// failure is why the session failed, for tools:servers, until sessionEnded
// has recorded it in the pool: the failed start's error or the reason a
// session ended on its own. Empty if it did not fail.
func (s *session) failure() string {
	select {
	case <-s.ready:
	default:
		return ""
	}
	if s.startErr != nil {
		return s.startErr.Error()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endedBy
}

// watch registers fn to receive stderr lines while the session starts.
func (s *session) watch(fn func(string)) (unwatch func()) {
	s.mu.Lock()
	id := s.nextW
	s.nextW++
	s.watchers[id] = fn
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.watchers, id)
		s.mu.Unlock()
	}
}

func (s *session) onStderr(line string) {
	line = strings.ToValidUTF8(line, "\uFFFD") // the stdio transport's lines are already; shown, never passed on
	s.mu.Lock()
	if len(s.stderr) >= 20 {
		copy(s.stderr, s.stderr[1:])
		s.stderr = s.stderr[:19]
	}
	s.stderr = append(s.stderr, line)
	fns := make([]func(string), 0, len(s.watchers))
	for _, fn := range s.watchers {
		fns = append(fns, fn)
	}
	s.mu.Unlock()
	for _, fn := range fns {
		fn(line)
	}
}

// The stderr block quoted to a page (a start's progress, its failure,
// tools:servers): the latest lines, at most this many, each cut to
// stderrLineBytes, and together within stderrBlockBytes (the oldest go
// first). A server's log wrapped at 80 columns (mcp 1.29.0's) is then read
// as the lines it wrote, not a fragment of one.
const (
	stderrBlockLines = 5
	stderrLineBytes  = 240
	stderrBlockBytes = 1024
)

// stderrTail returns up to n of the latest non-blank stderr lines, without
// control characters, each at most stderrLineBytes and together at most
// stderrBlockBytes.
func (s *session) stderrTail(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	total := 0
	for i := len(s.stderr) - 1; i >= 0 && len(out) < n; i-- {
		line := cleanLine(s.stderr[i], stderrLineBytes)
		if line == "" {
			continue
		}
		if total+len(line) > stderrBlockBytes {
			break
		}
		total += len(line)
		out = append(out, line)
	}
	slices.Reverse(out)
	return out
}

// cleanLine is line without control characters (escape sequences of a
// coloured log keep their printable rest), trimmed, and cut on a character
// boundary to at most max bytes, "…" included.
func cleanLine(line string, max int) string {
	line = strings.TrimSpace(strings.Map(func(r rune) rune {
		switch {
		case r == '\t':
			return ' '
		case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0:
			return -1
		}
		return r
	}, strings.ToValidUTF8(line, "\uFFFD")))
	if len(line) > max {
		cut := max - len("…")
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = line[:cut] + "…"
	}
	return line
}

func (s *session) lastStderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.stderr) - 1; i >= 0; i-- {
		if strings.TrimSpace(s.stderr[i]) != "" {
			return s.stderr[i]
		}
	}
	return ""
}

// stop ends the session; run answers its calls and stops the process.
func (s *session) stop() { s.stopOnce.Do(s.cancel) }

// run owns the session: it starts the server, lists its tools, waits for
// the end, and stops everything. Started by pool.acquire.
func (s *session) run(ctx context.Context) {
	defer close(s.done)
	log := s.b.log.With("server", s.spec.Name)
	started := time.Now()
	s.b.metrics.sessionStarted(s.spec.Name)
	conn, err := s.start(ctx)
	if err == nil {
		err = s.refreshListing(ctx)
	}
	if err != nil {
		if conn != nil {
			conn.close()
		}
		if ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded) {
			err = errStopped
		}
		s.startErr = s.describe(err)
		s.mu.Lock()
		s.ended = true
		s.mu.Unlock()
		close(s.ready)
		close(s.told)
		log.Warn("server failed to start", "error", s.startErr.Error(), "elapsed", time.Since(started).Round(time.Millisecond))
		if !errors.Is(err, errStopped) {
			s.b.metrics.sessionFailed(s.spec.Name)
		}
		s.b.pool.sessionEnded(s, s.startErr.Error(), false)
		return
	}
	log.Info("server connected", "elapsed", time.Since(started).Round(time.Millisecond))
	s.b.pool.sessionReady(s)
	close(s.ready)

	waitErr := make(chan error, 1)
	go func() { waitErr <- s.cs.Wait() }()
	lctx, stopLiveness := context.WithCancel(ctx)
	livenessDone := make(chan struct{})
	go func() {
		defer close(livenessDone)
		s.watchLiveness(lctx)
	}()
	cancelsDone := make(chan struct{})
	go func() {
		defer close(cancelsDone)
		if conn.pipes != nil {
			s.watchCancels(lctx, conn.pipes.Pgid(), conn.pipes.Pid())
		}
	}()
	var reason string
	onItsOwn := false
loop:
	for {
		select {
		case <-s.relist:
			if err := s.refreshListing(ctx); err != nil && ctx.Err() == nil {
				log.Warn("tools/list after list_changed failed", "error", err)
			}
		case err := <-waitErr:
			onItsOwn = true
			reason = s.describe(err).Error()
			break loop
		case why := <-s.gone:
			onItsOwn = true
			reason = why
			break loop
		case <-ctx.Done():
			reason = "stopped"
			break loop
		}
	}
	stopLiveness()
	<-livenessDone
	<-cancelsDone
	s.mu.Lock()
	s.ended = true
	if onItsOwn {
		s.endedBy = reason
	}
	calls := make([]*call, 0, len(s.calls))
	for _, c := range s.calls {
		calls = append(calls, c)
	}
	s.mu.Unlock()
	if onItsOwn {
		log.Warn("server session ended", "reason", reason)
		s.b.metrics.sessionFailed(s.spec.Name)
		// Every tab holding the session hears of its end before anything
		// else about it (its calls' answers below included).
		s.b.pool.closeHolders(s, reason)
	}
	close(s.told)
	for _, c := range calls {
		c.finish(nil, errorf(CodeServerFailed, "%s", reason))
	}
	// Cancel what is in flight before Close: ClientSession.Close waits for them.
	for _, c := range calls {
		c.cancelUpstream()
	}
	conn.close()
	if !onItsOwn {
		<-waitErr
	}
	s.b.pool.sessionEnded(s, reason, onItsOwn)
}

var errStopped = errors.New("stopped before it was ready")

// markHeard records that the server just sent something.
func (s *session) markHeard() { s.heardAt.Store(time.Now().UnixNano()) }

// silentFor is how long the server has sent nothing.
func (s *session) silentFor() time.Duration {
	return time.Since(time.Unix(0, s.heardAt.Load()))
}

// declareGone ends the session: the server stopped answering. run reads it.
func (s *session) declareGone(why string) {
	select {
	case s.gone <- why:
	default: // already declared
	}
}

// errConnEnded: a ping found the connection closed; run learns why from
// go-sdk (Wait), which says it better than the ping could.
var errConnEnded = errors.New("the connection ended")

// goneFor declares the session gone for err, a ping's failure, unless the
// connection already ended (run is told that by go-sdk).
func (s *session) goneFor(err error) {
	if !errors.Is(err, errConnEnded) {
		s.declareGone(oneLine(err.Error()))
	}
}

// codeRejected is the code of go-sdk's "rejected by transport" error: the
// message never reached the server (its POST failed), so it is no answer.
const codeRejected = -32005

// ping asks the server for a ping within Options.LivenessTimeout. Any
// answer, an error included, shows it is there; nil also when ctx ended
// (the bridge stopped asking, the server did not stop answering).
func (s *session) ping(ctx context.Context) error {
	timeout := s.b.opts.LivenessTimeout
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := s.cs.Ping(pctx, nil)
	var wire *jsonrpc.Error
	switch {
	case err == nil || errors.As(err, &wire) && wire.Code != codeRejected:
		s.markHeard()
		return nil
	case ctx.Err() != nil:
		return nil
	case errors.Is(err, mcp.ErrConnectionClosed):
		return errConnEnded
	case pctx.Err() != nil:
		return fmt.Errorf("%s stopped answering: no answer to a ping within %s", s.spec.Name, timeout)
	}
	return fmt.Errorf("%s stopped answering: a ping failed: %w", s.spec.Name, err)
}

// watchLiveness pings a server that has been silent for
// Options.LivenessInterval while the session has calls in flight, and
// declares it gone when it does not answer. It wakes when the server will
// have been silent for an interval (or every interval while no call is in
// flight), so a server that dies with a call in flight is pinged one
// interval after its last word. Run by run until ctx ends.
func (s *session) watchLiveness(ctx context.Context) {
	interval := s.b.opts.LivenessInterval
	if interval < 0 {
		return
	}
	wake := time.NewTimer(interval)
	defer wake.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake.C:
		}
		next := interval
		if s.callCount() > 0 {
			if silent := s.silentFor(); silent < interval {
				next = interval - silent
			} else if err := s.ping(ctx); err != nil {
				s.goneFor(err)
				return
			}
		}
		wake.Reset(max(next, time.Millisecond))
	}
}

// endedUnder is asked when a call failed without an answer (err): was it
// because the session ended? The server is pinged (unless the connection
// is known closed), and if the session ends, the tabs are told before the
// call is answered: it returns the reason then. A server that answers the
// ping has only failed this call.
func (s *session) endedUnder(err error) (why string, ended bool) {
	if !errors.Is(err, mcp.ErrConnectionClosed) && !errors.Is(err, mcp.ErrSessionMissing) {
		if perr := s.ping(s.b.ctx); perr == nil {
			select {
			case <-s.told:
			default:
				return "", false
			}
		} else {
			s.goneFor(perr)
		}
	}
	select {
	case <-s.told:
	case <-time.After(s.b.opts.LivenessTimeout + time.Second):
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endedBy, s.endedBy != ""
}

// alive is the check before a tab joins a running session: a server
// silent for Options.LivenessInterval is pinged first, and if it does not
// answer the session is declared gone (false).
func (s *session) alive(ctx context.Context) bool {
	if s.b.opts.LivenessInterval < 0 || s.silentFor() < s.b.opts.LivenessInterval {
		return true
	}
	if err := s.ping(ctx); err != nil {
		s.goneFor(err)
		return false
	}
	return true
}

// describe turns a session error into one line for the person, with the
// server's name and its last stderr line.
func (s *session) describe(err error) error {
	if err == nil {
		return fmt.Errorf("%s closed the connection", s.spec.Name)
	}
	var exit *stdio.ExitError
	if errors.As(err, &exit) {
		return exit
	}
	if hint := s.auth.Hint(s.spec.Name, slices.Collect(maps.Keys(s.spec.Headers))); hint != "" {
		return errors.New(oneLine(hint))
	}
	if n := s.resume.attempts(); n > 0 || s.resume.any() && strings.Contains(err.Error(), "retries without progress") {
		return errors.New(oneLine(fmt.Sprintf("%s: the server's event stream was cut and could not be resumed (%d attempts with Last-Event-ID in a row failed): %v", s.spec.Name, n, err)))
	}
	msg := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		msg = fmt.Sprintf("%s did not answer initialize within %s", s.spec.Name, s.b.opts.InitTimeout)
	} else if !strings.Contains(msg, s.spec.Name) {
		msg = s.spec.Name + ": " + msg
	}
	if line := s.lastStderr(); line != "" && !strings.Contains(msg, line) {
		msg += ": " + line
	}
	if errors.Is(err, child.ErrNotFound) || strings.Contains(msg, child.ErrNotFound.Error()) {
		// The entry's own hint, where configuration gave one (the default
		// server's names uv and how to install it), is the better fix.
		if len(s.spec.Warnings) > 0 {
			msg = strings.Replace(msg, child.ErrNotFound.Error(), s.spec.Warnings[0], 1)
		}
	}
	return errors.New(oneLine(msg))
}

// startedConn is what start leaves to close.
type startedConn struct {
	cs    *mcp.ClientSession
	rec   *recordingTransport
	pipes *stdio.Transport
}

func (c *startedConn) close() {
	if c.cs != nil {
		_ = c.cs.Close()
	}
	if c.rec != nil {
		c.rec.close()
	}
}

// recordingTransport remembers the connection its inner transport made, so
// the bridge can close it even when go-sdk's Connect fails half way.
type recordingTransport struct {
	inner mcp.Transport
	mu    sync.Mutex
	conn  mcp.Connection // guarded by mu
}

func (r *recordingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := r.inner.Connect(ctx)
	r.mu.Lock()
	r.conn = c
	r.mu.Unlock()
	return c, err
}

func (r *recordingTransport) close() {
	r.mu.Lock()
	c := r.conn
	r.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// startOnce starts the server and initializes the session (see start).
func (s *session) startOnce(ctx context.Context) (*startedConn, error) {
	var inner mcp.Transport
	probe := s.b.newProbe(s.key)
	sc := &startedConn{}
	switch s.spec.Transport {
	case TransportStdio:
		st := stdio.NewTransport(stdio.Options{
			Name:            s.spec.Name,
			Command:         s.spec.Command,
			Args:            s.spec.Args,
			Env:             s.b.childEnv(s.spec.Env),
			Dir:             s.spec.Cwd,
			MaxMessageBytes: s.b.opts.ResultLimit,
			OnStderrLine:    s.onStderr,
			FilterIncoming: func(raw []byte) []byte {
				s.markHeard()
				return s.tap.incomingStdio(raw)
			},
			StreamLine:        s.tap.streamLine,
			OnOutgoing:        s.tap.outgoing,
			TerminateDuration: s.b.opts.TerminateDuration,
			KillDuration:      s.b.opts.KillDuration,
			KeeperPath:        s.b.opts.KeeperPath,
			Logger:            s.b.log.With("server", s.spec.Name),
		})
		sc.pipes = st
		inner = &discoverBoundTransport{inner: st, probe: probe}
	case TransportHTTP:
		u, err := url.Parse(s.spec.URL)
		if err != nil || (u.Scheme != "https" && !(u.Scheme == "http" && LoopbackHost(u.Hostname()))) {
			return nil, fmt.Errorf("%s: url must use https unless the host is loopback", s.spec.Name)
		}
		// go-sdk resumes a cut event stream itself (GET with
		// Last-Event-ID, honouring the server's retry), up to MaxRetries
		// attempts in a row without a new event; zero would mean its
		// default, so the bridge's "never" (-1) is passed as is.
		hc := s.b.httpClientFor(s.spec, s.tap, &s.auth, &s.resume, probe)
		hc.Transport.(*tapRoundTripper).heard = s.markHeard
		inner = &mcp.StreamableClientTransport{
			Endpoint:   s.spec.URL,
			HTTPClient: hc,
			MaxRetries: s.b.opts.StreamRetries,
		}
	default:
		return nil, fmt.Errorf("%s: unknown transport %q", s.spec.Name, s.spec.Transport)
	}
	sc.rec = &recordingTransport{inner: inner}
	client := mcp.NewClient(&mcp.Implementation{Name: s.b.opts.Name, Version: s.b.opts.Version}, &mcp.ClientOptions{
		// Advertise nothing the bridge does not do: go-sdk's default
		// advertises roots (and answers roots/list with []).
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case s.relist <- struct{}{}:
			default: // a refresh is already pending
			}
		},
		Logger: slog.New(&sdkLogTap{inner: s.b.log.With("server", s.spec.Name, "component", "go-sdk").Handler(), onExclude: s.excludeTool}),
	})
	initSlot := &rawSlot{}
	s.tap.expectInit(initSlot)
	initCtx, cancel := context.WithTimeout(ctx, s.b.opts.InitTimeout)
	defer cancel()
	cs, err := client.Connect(initCtx, sc.rec, &mcp.ClientSessionOptions{ProtocolVersion: s.b.offeredVersion(s.key)})
	s.tap.expectInit(nil)
	if err != nil {
		err = s.connectFailed(probe, err)
		if sc.pipes != nil && !errors.Is(err, errModernAfterBound) {
			if exit := sc.pipes.ExitError(); exit != nil && !exit.Stopped {
				// The server exited on its own: say that (with its last
				// stderr line), not go-sdk's "connection closed: calling
				// "initialize": client is closing:" around it.
				return sc, exit
			}
		}
		return sc, err
	}
	sc.cs = cs
	s.cs = cs
	if res := cs.InitializeResult(); res != nil {
		s.protocolVersion = res.ProtocolVersion
		s.b.rememberVersion(s.key, res.ProtocolVersion)
	}
	raw, _, _ := initSlot.get()
	s.serverInfo, s.instructions = describedSelf(raw)
	return sc, nil
}

// describedSelf returns what an initialize (or server/discover) result
// says about the server, raw as sent but for bytes that are not UTF-8: the serverInfo object (name,
// version, title, websiteUrl, icons, ...; server/discover has it in _meta)
// and the instructions string (nil if absent). A serverInfo
// that is not an object becomes {"name":"","version":""}; instructions that
// are not a string are left out.
func describedSelf(result []byte) (info, instructions json.RawMessage) {
	var r struct {
		ServerInfo   json.RawMessage `json:"serverInfo"`
		Instructions json.RawMessage `json:"instructions"`
		Meta         struct {
			// Where server/discover (revision 2026-07-28) carries it.
			ServerInfo json.RawMessage `json:"io.modelcontextprotocol/serverInfo"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(result, &r)
	if len(r.ServerInfo) == 0 {
		r.ServerInfo = r.Meta.ServerInfo
	}
	info = []byte(`{"name":"","version":""}`)
	if len(r.ServerInfo) > 0 && r.ServerInfo[0] == '{' {
		info = r.ServerInfo
	}
	if len(r.Instructions) > 0 && r.Instructions[0] == '"' {
		instructions = r.Instructions
	}
	// Shown to a person, never passed on: bytes that are not UTF-8 become
	// U+FFFD rather than reach the page's text frame.
	return validText(info), validText(instructions)
}

// listingFields are the raw reply fields of a listing: tools, and
// droppedTools when some were left out.
func listingFields(l *listing) []rawField {
	out := []rawField{{"tools", l.raw}}
	if l.dropped != nil {
		out = append(out, rawField{"droppedTools", l.dropped})
	}
	return out
}

// excludeTool records that go-sdk excluded a tool from a tools/list page.
func (s *session) excludeTool(tool, reason string) {
	s.mu.Lock()
	if s.excluded != nil {
		s.excluded[tool] = reason
	}
	s.mu.Unlock()
}

// sdkLogTap passes go-sdk's log on and reports the tools it excludes from
// a tools/list page (invalid x-mcp-header declarations): go-sdk's log is
// the only place that says which and why.
type sdkLogTap struct {
	inner     slog.Handler
	onExclude func(tool, reason string)
}

func (h *sdkLogTap) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelError || h.inner.Enabled(ctx, l)
}

func (h *sdkLogTap) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "excluding tool from tools/list" {
		var tool, reason string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "tool":
				tool = a.Value.String()
			case "error":
				reason = a.Value.String()
			}
			return true
		})
		h.onExclude(tool, reason)
	}
	if !h.inner.Enabled(ctx, r.Level) {
		return nil
	}
	return h.inner.Handle(ctx, r)
}

func (h *sdkLogTap) WithAttrs(as []slog.Attr) slog.Handler {
	return &sdkLogTap{inner: h.inner.WithAttrs(as), onExclude: h.onExclude}
}

func (h *sdkLogTap) WithGroup(name string) slog.Handler {
	return &sdkLogTap{inner: h.inner.WithGroup(name), onExclude: h.onExclude}
}

// selfFields returns serverInfo and (if the server sent them) instructions
// as raw reply fields, exactly as the server sent them, followed by more.
func (s *session) selfFields(more ...rawField) []rawField {
	out := []rawField{{"serverInfo", s.serverInfo}}
	if s.instructions != nil {
		out = append(out, rawField{"instructions", s.instructions})
	}
	return append(out, more...)
}

// refreshListing fetches every page of tools/list, raw, and replaces the
// listing. Called by run only (listing is serialized).
func (s *session) refreshListing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.b.opts.InitTimeout)
	defer cancel()
	var tools []json.RawMessage
	cursor := ""
	s.mu.Lock()
	s.excluded = map[string]string{}
	s.mu.Unlock()
	for page := 0; ; page++ {
		if page >= 1000 {
			return fmt.Errorf("%s: tools/list did not end after 1000 pages", s.spec.Name)
		}
		slot := &rawSlot{list: true}
		s.tap.expectList(slot)
		params := &mcp.ListToolsParams{}
		if cursor != "" {
			params.Cursor = cursor
		}
		_, err := s.cs.ListTools(ctx, params)
		raw, rpcErr, got := slot.get()
		if rpcErr != nil {
			return fmt.Errorf("%s: tools/list failed: %s", s.spec.Name, rpcErr.Message)
		}
		if err != nil && !got {
			return fmt.Errorf("tools/list: %w", err)
		}
		var pageBody struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor *string           `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &pageBody); err != nil {
			return fmt.Errorf("%s: tools/list result is malformed: %v", s.spec.Name, err)
		}
		tools = append(tools, pageBody.Tools...)
		if pageBody.NextCursor == nil || *pageBody.NextCursor == "" {
			break
		}
		cursor = *pageBody.NextCursor
	}
	l := &listing{tools: make(map[string]toolInfo, len(tools))}
	s.mu.Lock()
	excluded := s.excluded
	s.excluded = nil
	s.mu.Unlock()
	// Revision 2026-07-28: a tool whose x-mcp-header declarations are
	// invalid cannot be called correctly (go-sdk sends no headers for it).
	// Any revision: a tool whose text is not UTF-8 cannot reach the page in
	// a text frame. Either is left out, and the page told which and why.
	headersChecked := s.protocolVersion >= "2026-07-28" && len(excluded) > 0
	type dropped struct {
		Name   string `json:"name"`
		Reason string `json:"reason"`
	}
	var out []dropped
	kept := tools[:0:0]
	for _, t := range tools {
		var info struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(t, &info) // the name made valid (U+FFFD), for the page
		if at := invalidUTF8At(t); at >= 0 {
			out = append(out, dropped{info.Name, fmt.Sprintf("not valid UTF-8: byte %d of its definition is 0x%02x", at, t[at])})
			continue
		}
		if why, ok := excluded[info.Name]; ok && headersChecked {
			out = append(out, dropped{info.Name, oneLine("invalid x-mcp-header declaration: " + why)})
			continue
		}
		kept = append(kept, t)
	}
	tools = kept
	if len(out) > 0 {
		l.dropped, _ = json.Marshal(out)
		s.b.log.Warn("tools left out of the listing", "server", s.spec.Name, "dropped", string(l.dropped))
	}
	size := 2
	for _, t := range tools {
		size += len(t) + 1
	}
	l.raw = make([]byte, 0, size)
	l.raw = append(l.raw, '[')
	for i, t := range tools {
		if i > 0 {
			l.raw = append(l.raw, ',')
		}
		l.raw = append(l.raw, t...)
		var info struct {
			Name string `json:"name"`
			Meta struct {
				Builder struct {
					ExpectedSeconds float64 `json:"expectedSeconds"`
				} `json:"io.github.megane-labs/builder"`
			} `json:"_meta"`
		}
		if json.Unmarshal(t, &info) == nil && info.Name != "" {
			l.tools[info.Name] = toolInfo{expectedSeconds: info.Meta.Builder.ExpectedSeconds}
		}
	}
	l.raw = append(l.raw, ']')
	s.mu.Lock()
	s.listing = l
	s.mu.Unlock()
	return nil
}

func (s *session) currentListing() *listing {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listing
}

// callTool runs one tools/call upstream and returns its raw result.
func (s *session) callTool(ctx context.Context, c *call) ([]byte, *protoError) {
	slot := c.slot
	if slot == nil {
		slot = &rawSlot{}
	}
	s.tap.expectCall(c.token, slot)
	params := &mcp.CallToolParams{Name: c.tool, Arguments: json.RawMessage(c.args)}
	params.SetProgressToken(c.token)
	_, err := s.cs.CallTool(ctx, params)
	raw, rpcErr, got := slot.get()
	var wire *jsonrpc.Error
	if rpcErr == nil && errors.As(err, &wire) && (wire.Code == stdio.CodeTooLarge || wire.Code == stdio.CodeUnreadable || wire.Code == codeNoRoom) {
		// The transport synthesized it without the tap seeing it.
		rpcErr = &rpcError{Code: wire.Code, Message: wire.Message, Data: wire.Data}
	}
	switch {
	case rpcErr != nil && rpcErr.Code == stdio.CodeTooLarge:
		e := errorf(CodeTooLargeErr, "%s: the result is larger than the bridge's limit of %d bytes", s.spec.Name, s.b.opts.ResultLimit)
		var d struct{ Size, Limit int64 }
		if json.Unmarshal(rpcErr.Data, &d) == nil {
			e.Size, e.Limit = d.Size, d.Limit
			if d.Size > 0 {
				e.Message = oneLine(fmt.Sprintf("%s: the result of %d bytes is larger than the bridge's limit of %d bytes", s.spec.Name, d.Size, s.b.opts.ResultLimit))
			}
		}
		if e.Limit == 0 {
			e.Limit = s.b.opts.ResultLimit
		}
		return nil, e
	case rpcErr != nil && rpcErr.Code == codeNoRoom:
		var d struct {
			Never bool
			Limit int64
		}
		if json.Unmarshal(rpcErr.Data, &d) == nil && d.Never {
			e := errorf(CodeTooLargeErr, "%s: %s", s.spec.Name, rpcErr.Message)
			e.Limit = d.Limit
			return nil, e
		}
		return nil, errorf(CodeBusy, "%s: %s", s.spec.Name, rpcErr.Message)
	case rpcErr != nil && rpcErr.Code == stdio.CodeUnreadable:
		return nil, errorf(CodeServerFailed, "%s: %s failed: %s", s.spec.Name, c.tool, rpcErr.Message)
	case rpcErr != nil:
		return nil, errorf(CodeServerFailed, "%s: %s (JSON-RPC error %d)", s.spec.Name, rpcErr.Message, rpcErr.Code)
	case got:
		if at := invalidUTF8At(raw); at >= 0 {
			return nil, errorf(CodeServerFailed, "%s: the result of %s is not valid UTF-8 (byte %d of it is 0x%02x): the bridge passes only text to the page; the server must send JSON in UTF-8", s.spec.Name, c.tool, at, raw[at])
		}
		if e := inputRequired(s.spec.Name, c.tool, raw); e != nil {
			return nil, e
		}
		return raw, nil
	case errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return nil, errorf(CodeTimeout, "%s: %s did not finish within %s", s.spec.Name, c.tool, c.timeout)
	case ctx.Err() != nil:
		return nil, errorf(CodeCancelled, "the call was cancelled")
	case err != nil:
		if why, ended := s.endedUnder(err); ended {
			return nil, errorf(CodeServerFailed, "%s", why)
		}
		return nil, errorf(CodeServerFailed, "%s", s.describe(err).Error())
	}
	return nil, errorf(CodeServerFailed, "%s: no result", s.spec.Name)
}

// inputRequired returns the error for the page when a tools/call result is
// one of revision 2026-07-28's multi-round-trip results (resultType
// "input_required": the server asks the client for input and wants the
// call retried with the answers). The Builder cannot supply such input, so
// the call fails with one line naming what the tool wanted; nil for any
// other result. Only the top-level resultType is read (a cheap test first:
// results can be 40 MB).
func inputRequired(server, tool string, raw []byte) *protoError {
	if markInputRequired.index(raw) < 0 {
		return nil
	}
	var r struct {
		ResultType    string `json:"resultType"`
		InputRequests map[string]struct {
			Method string `json:"method"`
			Params struct {
				Message string `json:"message"`
			} `json:"params"`
		} `json:"inputRequests"`
	}
	if json.Unmarshal(raw, &r) != nil || r.ResultType != "input_required" {
		return nil
	}
	var wants []string
	for _, id := range slices.Sorted(maps.Keys(r.InputRequests)) {
		in := r.InputRequests[id]
		w := in.Method
		if w == "" {
			w = "unknown input"
		}
		if m := strings.TrimSpace(in.Params.Message); m != "" {
			if len(m) > 200 {
				m = strings.ToValidUTF8(m[:200], "") + "…"
			}
			w += fmt.Sprintf(" %q", m)
		}
		wants = append(wants, w)
	}
	if len(wants) == 0 {
		wants = []string{"input it did not describe"}
	}
	return errorf(CodeServerFailed, "%s: %s asked for more input (%s), which the Builder cannot supply in the middle of a call", server, tool, strings.Join(wants, "; "))
}

// childEnv is the environment of a stdio server: the bridge's own, less the
// credentials it must never pass on, plus the entry's env (child.Environ).
func (b *Bridge) childEnv(extra map[string]string) []string {
	base := b.opts.Environ
	if base == nil {
		base = os.Environ()
	}
	return child.Environ(base, b.opts.StripEnv, extra)
}

// httpClientFor returns the HTTP client for one start of a Streamable HTTP
// server: the entry's headers on every request, nothing of the page's
// request, no cookies, no redirects, the raw tap on response bodies, and
// server/discover bounded as probe says.
func (b *Bridge) httpClientFor(spec ServerSpec, t *tap, auth *AuthWatch, resume *resumeWatch, probe *discoverProbe) *http.Client {
	base := b.opts.HTTPTransport
	if base == nil {
		base = http.DefaultTransport
	}
	return &http.Client{
		Transport: &tapRoundTripper{base: base, headers: spec.Headers, tap: t, auth: auth, resume: resume, log: b.log.With("server", spec.Name),
			probe: probe, limit: b.opts.ResultLimit},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return fmt.Errorf("%s: the server answered with a redirect, which the bridge does not follow", spec.Name)
		},
	}
}

// LoopbackHost reports whether a tool server URL's host (url.Hostname) is
// reached over this machine's loopback: "localhost" or a loopback address.
// Only such a URL may use plain http. Other names under .localhost are not:
// the bridge resolves names with the system's resolver, which may ask DNS
// for them, so "http://tools.localhost" could be plaintext to another
// machine. (A browser's Host header is another question: auth accepts
// *.localhost there, because browsers resolve it to loopback themselves.)
// The one definition: configuration checks URLs with it too.
func LoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
