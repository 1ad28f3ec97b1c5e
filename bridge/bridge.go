package bridge

import (
	"context"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// Options configures a Bridge. Every zero value has a documented default.
type Options struct {
	Catalog   Catalog   // the configured servers; required
	Gate      Gate      // who may open a socket; required
	Approvals Approvals // confirmation receipts; if nil, every connect needs confirmed: true and no receipt is issued

	Logger  *slog.Logger // nil = discard
	Name    string       // the bridge's name in tools:servers and MCP clientInfo; if empty, "megane-jupyter-bridge"
	Version string       // if empty, "dev"

	BaseURL string // the Jupyter base URL the bridge is served under; if empty, "/"

	FrameLimit   int64 // largest frame sent to a page; if zero, 8 MiB
	InboundLimit int64 // largest page message, whole or reassembled; if zero, 64 MiB
	// InboundMemory bounds the bytes of the frames all tabs are sending
	// together: a frame is read in pieces, each counted before it is read,
	// until it has been handled (a page that sends most of a large frame
	// and stops holds only what it sent, and only within this). When a
	// piece does not fit, the tab that cannot have its share is closed
	// with 1013 and a reason: the tab itself if it would hold more than an
	// equal share among the tabs reading a frame, else the tab holding the
	// most. Small frames of other pages are always read. If zero, an
	// eighth of MemoryLimit (128 MiB with the defaults), or 256 MiB when
	// there is no ceiling; never less than 1 MiB.
	InboundMemory int64
	ResultLimit   int64 // largest tools/call result accepted from a server; if zero, 256 MiB
	// MemoryLimit is the bridge's memory ceiling: above 90% of it (the Go
	// runtime's memory, /memory/classes/total:bytes), new connects, calls
	// and chunk sequences are refused with busy and a reason, while the
	// work in flight finishes (see Bridge.MemoryLimit).
	// If zero, 3 × ResultLimit + 256 MiB (the largest result's peak, about
	// 1.9 × its size, with headroom); negative, none.
	MemoryLimit int64
	// ResultMemory bounds the bytes of tool servers' answers being read
	// over Streamable HTTP, and of the results held for their calls until
	// they are queued for the page, all servers and calls together; each
	// buffer is reserved at its capacity before it is read (results.go).
	// A call whose answer finds no room fails with busy at once (with
	// too-large when it could never fit: an answer of unknown length,
	// gzip-compressed or an event, needs up to a quarter again as much as
	// its size while its buffer grows, when it is near ResultLimit). If
	// zero, five sixteenths of MemoryLimit but at least 5/4 of ResultLimit
	// + 1 MiB (321 MiB with the defaults), or SizeMax when there is no
	// ceiling.
	ResultMemory int64

	MaxCallsPerTab    int // calls in flight per tab; if zero, 16
	MaxCallsPerServer int // calls in flight per session; if zero, 64
	// MaxPendingConnects: tools:connect requests in flight (waiting for a
	// server's start) per tab; more are answered busy. If zero, 8.
	MaxPendingConnects int
	// OutboundBytes bounds the bytes queued for one tab, each message
	// counted with 128 bytes more (its entry): a tab whose queue would grow
	// past it is not reading and is closed with 4408. The queue is bounded
	// in bytes only, never in messages, and a call's progress waiting in it
	// is replaced by the next (superseded progress costs nothing), so a page
	// that reads is never closed for a chatty server or for many requests
	// sent before it reads. A page that stops reading in the middle of a
	// frame is cut when that write passes WriteTimeout. If zero,
	// ResultLimit + 16 MiB (one largest result and the small messages
	// around it).
	OutboundBytes int64
	// OutboundTotal bounds the bytes queued for all tabs together: past
	// it, the tab with the most queued is closed with 4408 until the total
	// fits. If zero, 1 GiB; never less than OutboundBytes.
	OutboundTotal int64
	// ProgressInterval paces each call's tools:progress: at most one per
	// interval reaches the page, the latest (a server that reports faster
	// is read and its superseded progress dropped; the last progress before
	// the result is always sent, ahead of it). The page's progress bar
	// loses nothing a person can see, and a server reporting in a tight
	// loop costs the page and its socket a message per interval instead
	// of one per report. If zero, 50ms; negative, no pacing.
	ProgressInterval time.Duration

	PingInterval   time.Duration // if zero, 30s
	PongTimeout    time.Duration // a socket silent this long is dropped; if zero, 60s
	WriteTimeout   time.Duration // for one frame; if zero, 30s
	InitTimeout    time.Duration // for initialize and tools/list; if zero, 10 minutes
	CallTimeoutMax time.Duration // if zero, 30 minutes
	// RestartBusyAfterCancel ends the session of a stdio server whose
	// processes are still computing this long after one of its calls was
	// cancelled (aftercancel.go): its tabs are told (tools:closed) and its
	// calls in flight fail with the reason, so no call waits silently
	// behind work nobody wants; the next connect starts it afresh. If zero,
	// never: such a server is only reported ([limits]
	// restart_busy_after_cancel).
	RestartBusyAfterCancel time.Duration
	IdleGrace              time.Duration // how long a session no tab holds lives on; if zero, 5s; negative, none
	// ResumeGrace is how long a page session (a tab whose page asked for
	// "resume" in tools:hello, pagesession.go) outlives its socket: its
	// calls go on, and a socket of the same user from the same Origin
	// presenting its token takes it over. When it passes, the tab ends as a
	// closed tab does: its calls are cancelled. If zero, 5 minutes;
	// negative, resume is not offered.
	ResumeGrace time.Duration
	// MaxAwayPerUser and MaxAway bound the page sessions without a socket,
	// of one user and in all: past either, the one away longest ends at
	// once, as when its grace passes. If zero, 8 and 64.
	MaxAwayPerUser, MaxAway int
	// AwayMemory bounds the bytes held for pages away (the messages queued
	// for them and not acknowledged, results at their full size): past it,
	// results held for them are replaced, the oldest first, by an error
	// with code dropped that says so, and when none is left the page
	// session away longest ends. If zero, half of the smaller of
	// ResultMemory and OutboundTotal (160 MiB with the defaults).
	AwayMemory   int64
	ChunkTimeout time.Duration // an inbound chunk sequence must complete within this (a timer drops it); if zero, 60s
	// ChunkMemory bounds the bytes declared by the incomplete inbound chunk
	// sequences of all tabs together (each tab's are also within
	// InboundLimit); a sequence that would exceed it is refused busy. If
	// zero, an eighth of MemoryLimit but at least InboundLimit (128 MiB
	// with the defaults), or 256 MiB when there is no ceiling.
	ChunkMemory int64
	// ConfigRecheck: a tools:call checks that its server is still configured
	// against the Catalog as read at most this long ago (tools:servers and
	// tools:connect always read it). If zero, 1s; negative, on every call.
	ConfigRecheck time.Duration

	ProtocolVersion string // MCP protocol version offered first; if empty, "2026-07-28" (older servers: see DiscoverTimeout)
	// DiscoverTimeout bounds the wait for an answer to server/discover
	// (offered when ProtocolVersion is 2026-07-28 or later): a server that
	// leaves it unanswered is treated as one that refused it, and go-sdk
	// falls back to initialize. The wait starts when the request is
	// written; a server of 2026-07-28 only (stdio or Streamable HTTP) that
	// answers it late or refuses initialize naming that revision is
	// started again without the bound, and a server definition known to
	// speak it gets no bound until a start of it fails (discover.go).
	// If zero, 10s; negative, no bound (InitTimeout).
	DiscoverTimeout time.Duration

	// StreamRetries bounds the resumption of a Streamable HTTP server's
	// event stream that was cut (a proxy that ends long responses): the
	// bridge reconnects with Last-Event-ID, after the server's retry delay
	// or a backoff from 1s, at most this many times in a row without a new
	// event before the session fails. If zero, 5; negative, never (one cut
	// stream ends the session).
	StreamRetries int

	// LivenessInterval: a server silent this long (nothing received from
	// it: no answer, no progress, no event) is pinged, with
	// LivenessTimeout to answer, before a tab joins its session, and
	// while the session has calls in flight. A server that does not
	// answer in time (any answer, an error included, will do) has
	// stopped: its session ends, its process group is stopped, and its
	// tabs get tools:closed. So a server that dies under a wrapper that
	// keeps its pipes open, with a call in flight, is ended about
	// LivenessInterval + LivenessTimeout after its last word.
	// If zero, 10s; negative, never pinged.
	LivenessInterval time.Duration
	// LivenessTimeout bounds the answer to a liveness ping (see
	// LivenessInterval). If zero, 5s.
	LivenessTimeout time.Duration

	Environ  []string // base environment of stdio servers; if nil, os.Environ()
	StripEnv []string // variable names never passed to stdio servers (credentials); "NAME_*" strips a prefix

	KeeperPath        string        // see stdio.Options.KeeperPath
	TerminateDuration time.Duration // see stdio.Options
	KillDuration      time.Duration // see stdio.Options

	HTTPTransport http.RoundTripper // base transport for Streamable HTTP servers; if nil, http.DefaultTransport

	// ReleaseAfter: after sending a message at least this large, the bridge
	// returns the memory it freed to the operating system at once
	// (debug.FreeOSMemory), so that the buffers of one large result do not
	// add to the peak of the next. If zero, 16 MiB; negative, never.
	ReleaseAfter int64

	// MetricsPublicOnLoopback serves the metrics
	// ({base}megane/builder-tools/metrics) without asking the Gate to a
	// request made directly from this machine to the bridge's port: a TCP
	// peer on a loopback address, a Host naming this machine's loopback
	// (localhost, a name under .localhost, or a loopback address) and the
	// port it arrived on,
	// and no proxy's forwarding header (X-Forwarded-For, Forwarded,
	// X-Real-IP), such as a node-exporter sidecar. jupyter-server-proxy's
	// requests pass on the client's Host and so never qualify. Any other
	// request is admitted as the status page is. If false, every scrape
	// goes through the Gate.
	MetricsPublicOnLoopback bool
	// AuditFile, if set, is the file the audit record is appended to, one
	// JSON line per call, connect, confirmation and refusal (audit.go),
	// created owner-only (0600). If empty, the record is only logged.
	AuditFile string
	// AuditMaxBytes: the audit file is rotated (to AuditFile.1, …) before
	// a record would take it past this size. If zero, 64 MiB.
	AuditMaxBytes int64
	// AuditKeep is how many rotated audit files are kept. If zero, 3.
	AuditKeep int

	// Page, if non-nil, is served (after the Gate admits the request) at
	// /builder-tools/ and {base}megane/builder-tools/ (see Bridge.Paths).
	Page http.Handler
}

// SizeMax is the largest value any size of Options takes (1 TiB); a
// larger one counts as SizeMax.
const SizeMax = 1 << 40

func (o *Options) setDefaults() {
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	// Every size is at most SizeMax, so that no sum of them overflows:
	// a result limit of MaxInt64 made the outbound budget negative, and
	// every page was closed as not reading.
	for _, v := range []*int64{&o.FrameLimit, &o.InboundLimit, &o.ResultLimit, &o.ChunkMemory, &o.OutboundBytes,
		&o.OutboundTotal, &o.ReleaseAfter, &o.AuditMaxBytes, &o.MemoryLimit, &o.InboundMemory, &o.ResultMemory, &o.AwayMemory} {
		*v = min(*v, SizeMax)
	}
	if o.Name == "" {
		o.Name = "megane-jupyter-bridge"
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.BaseURL == "" {
		o.BaseURL = "/"
	}
	if !strings.HasSuffix(o.BaseURL, "/") {
		o.BaseURL += "/"
	}
	if !strings.HasPrefix(o.BaseURL, "/") {
		o.BaseURL = "/" + o.BaseURL
	}
	def(&o.FrameLimit, 8<<20)
	def(&o.InboundLimit, 64<<20)
	def(&o.ResultLimit, 256<<20)
	if o.MaxCallsPerTab == 0 {
		o.MaxCallsPerTab = 16
	}
	if o.MaxCallsPerServer == 0 {
		o.MaxCallsPerServer = 64
	}
	if o.MaxPendingConnects == 0 {
		o.MaxPendingConnects = 8
	}
	def(&o.OutboundBytes, o.ResultLimit+16<<20)
	def(&o.OutboundTotal, 1<<30)
	o.OutboundTotal = max(o.OutboundTotal, o.OutboundBytes)
	defD(&o.ProgressInterval, 50*time.Millisecond)
	defD(&o.PingInterval, 30*time.Second)
	defD(&o.PongTimeout, 60*time.Second)
	defD(&o.WriteTimeout, 30*time.Second)
	defD(&o.InitTimeout, 10*time.Minute)
	defD(&o.DiscoverTimeout, 10*time.Second)
	defD(&o.CallTimeoutMax, 30*time.Minute)
	defD(&o.IdleGrace, 5*time.Second)
	defD(&o.ChunkTimeout, 60*time.Second)
	defD(&o.ResumeGrace, 5*time.Minute)
	if o.MaxAwayPerUser <= 0 {
		o.MaxAwayPerUser = 8
	}
	if o.MaxAway <= 0 {
		o.MaxAway = 64
	}
	defD(&o.ConfigRecheck, time.Second)
	defD(&o.LivenessInterval, 10*time.Second)
	defD(&o.LivenessTimeout, 5*time.Second)
	if o.ProtocolVersion == "" {
		o.ProtocolVersion = "2026-07-28"
	}
	if o.StreamRetries == 0 {
		o.StreamRetries = 5
	}
	def(&o.ReleaseAfter, 16<<20)
	def(&o.AuditMaxBytes, 64<<20)
	if o.AuditKeep <= 0 {
		o.AuditKeep = 3
	}
	def(&o.MemoryLimit, 3*o.ResultLimit+256<<20)
	// The budgets of what pages and servers can make the bridge hold
	// share the ceiling, and leave room for the garbage a burst makes
	// (the runtime's memory limit is 15/16 of the ceiling): with the
	// defaults, 128 + 128 + 321 MiB of 1 GiB.
	if o.ResultMemory == 0 {
		o.ResultMemory = SizeMax
		if o.MemoryLimit > 0 {
			o.ResultMemory = max(o.MemoryLimit*5/16, o.ResultLimit*5/4+1<<20)
		}
	}
	if o.InboundMemory == 0 {
		o.InboundMemory = 256 << 20
		if o.MemoryLimit > 0 {
			o.InboundMemory = o.MemoryLimit / 8
		}
	}
	if o.ChunkMemory == 0 {
		o.ChunkMemory = 256 << 20
		if o.MemoryLimit > 0 {
			o.ChunkMemory = max(o.MemoryLimit/8, o.InboundLimit)
		}
	}
	o.InboundMemory = max(o.InboundMemory, 1<<20)
	if o.AwayMemory <= 0 {
		o.AwayMemory = min(o.ResultMemory, o.OutboundTotal) / 2
	}
	if o.FrameLimit < 4096 {
		o.FrameLimit = 4096
	}
}

// Bridge serves the page protocol. Create it with New, serve it as an
// http.Handler, and Close it to stop every tab and session.
type Bridge struct {
	opts Options
	log  *slog.Logger

	ctx    context.Context // cancelled by Close; parent of every session
	cancel context.CancelFunc
	wg     sync.WaitGroup // tabs and sessions

	nextID atomic.Uint64 // call tokens and chunk ids
	queued atomic.Int64  // bytes queued for all tabs (the sum of their tab.queued)

	mu       sync.Mutex
	closed   bool              // guarded by mu
	tabs     map[*tab]struct{} // guarded by mu; every tab, away ones included
	sessions map[string]*tab   // guarded by mu; resumable tabs, by pageKey of their token
	awayMu   sync.Mutex        // serializes trimAway
	spoken   map[string]string // guarded by mu; by sessionKey: the revision a server last agreed to

	snapMu         sync.Mutex
	snap           Snapshot  // guarded by snapMu; the Catalog's latest answer
	snapAt         time.Time // guarded by snapMu; when that read began; zero before the first
	snapRefreshing bool      // guarded by snapMu; a refresh for calls is under way (snapshot)

	upgrader websocket.Upgrader
	pool     *pool        // set by New; the sessions tabs share, under a lock of its own
	routes   *routes      // set by New
	mem      *memoryGauge // set by New
	chunks   *chunkPool   // set by New; the bytes of every tab's incomplete chunk sequences (Options.ChunkMemory)
	inbound  *inboundPool // set by New; the bytes of the frames tabs are sending (Options.InboundMemory)
	results  *resultPool  // set by New; the bytes of server answers read and held for their calls (Options.ResultMemory)
	pieces   sync.Pool    // of *[]byte: streamed pieces' buffers, back from the tabs (stream.go); a collection empties it
	lane     *lane        // set by New; bulk work waits for a place in it (lane.go)
	metrics  *meters      // set by New; this bridge's registry (metrics.go)

	auditFile *auditFile // set by New when Options.AuditFile is; nil otherwise
}

// New returns a Bridge. It starts nothing until a page connects.
func New(opts Options) *Bridge {
	opts.setDefaults()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Bridge{
		opts: opts, log: log, ctx: ctx, cancel: cancel,
		tabs:     map[*tab]struct{}{},
		sessions: map[string]*tab{},
		spoken:   map[string]string{},
	}
	b.pool = newPool(b)
	b.routes = newRoutes(opts.BaseURL, log)
	b.mem = newMemoryGauge()
	b.chunks = &chunkPool{limit: opts.ChunkMemory}
	b.inbound = newInboundPool(opts.InboundMemory)
	b.results = newResultPool(opts.ResultMemory)
	b.lane = newLane(0, 0)
	b.metrics = newMetrics(b)
	if opts.AuditFile != "" {
		b.auditFile = &auditFile{path: opts.AuditFile, max: opts.AuditMaxBytes, keep: opts.AuditKeep, log: log}
	}
	b.upgrader = websocket.Upgrader{
		ReadBufferSize:  32 << 10,
		WriteBufferSize: 32 << 10,
		// The Gate has already judged Origin and Host when Upgrade runs; this
		// only confirms that the request went through it.
		CheckOrigin: func(r *http.Request) bool { return admittedFrom(r.Context()) },
	}
	return b
}

type admittedKey struct{}

func admittedFrom(ctx context.Context) bool { v, _ := ctx.Value(admittedKey{}).(bool); return v }

func (b *Bridge) serveSocket(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		http.Error(w, "the bridge is shutting down", http.StatusServiceUnavailable)
		return
	}
	if !websocket.IsWebSocketUpgrade(r) {
		http.Error(w, "this is the Builder Tools WebSocket: connect with a WebSocket client", http.StatusBadRequest)
		return
	}
	adm, refusal := b.opts.Gate.Admit(r.Context(), r)
	if refusal != nil && refusal.HTTPStatus != 0 {
		b.log.Info("socket refused", "status", refusal.HTTPStatus, "reason", refusal.Reason, "remote", r.RemoteAddr)
		b.metrics.refusedHTTP(refusal.HTTPStatus)
		b.audit(auditRecord{Event: auditRefused, Code: "http_" + strconv.Itoa(refusal.HTTPStatus), Remote: r.RemoteAddr})
		http.Error(w, refusal.Reason, refusal.HTTPStatus)
		return
	}
	conn, err := b.upgrader.Upgrade(w, r.WithContext(context.WithValue(r.Context(), admittedKey{}, true)), nil)
	if err != nil {
		return // the upgrader has answered
	}
	if refusal != nil {
		b.log.Info("socket refused", "code", refusal.CloseCode, "reason", refusal.Reason, "remote", r.RemoteAddr)
		b.metrics.refused(refusal.CloseCode)
		b.audit(auditRecord{Event: auditRefused, Code: strconv.Itoa(refusal.CloseCode), Remote: r.RemoteAddr})
		writeClosing(conn, refusal.CloseCode, refusal.Reason, time.Second)
		// Give the peer a moment to read the close frame before the drop.
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		for {
			if _, _, err := conn.NextReader(); err != nil {
				break
			}
		}
		conn.Close()
		return
	}
	t := newTab(b, conn, adm, r.Header.Get("Origin"))
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		conn.Close()
		return
	}
	b.tabs[t] = struct{}{}
	b.wg.Add(1)
	b.mu.Unlock()
	defer b.wg.Done()
	b.log.Info("tab opened", "user", adm.User, "tab", t.id)
	b.audit(auditRecord{Event: auditOpen, User: adm.User, Outcome: outcomeOK, Tab: t.id, Remote: r.RemoteAddr})
	t.serve()
	b.mu.Lock()
	delete(b.tabs, t)
	b.mu.Unlock()
	b.log.Info("tab closed", "user", adm.User, "tab", t.id)
}

// writeClosing sends tools:closing and then the close frame. The message
// is what survives jupyter-server-proxy, which replaces the close code with
// 1005 on the page's side.
func writeClosing(conn *websocket.Conn, code int, reason string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	msg := buildMessage(struct {
		Type   string `json:"type"`
		Code   int    `json:"code"`
		Reason string `json:"reason"`
	}{typeClosing, code, oneLine(reason)})
	_ = conn.SetWriteDeadline(deadline)
	_ = conn.WriteMessage(websocket.TextMessage, msg)
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, truncateReason(reason)), deadline)
}

// truncateReason keeps a close reason within the 123 bytes a close frame allows.
func truncateReason(s string) string {
	s = oneLine(s)
	if len(s) <= 123 {
		return s
	}
	cut := 120
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}

// Close closes every tab (1001), answers their calls, stops every session and
// waits for all of it. It is safe to call more than once.
func (b *Bridge) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.wg.Wait()
		return nil
	}
	b.closed = true
	tabs := make([]*tab, 0, len(b.tabs))
	for t := range b.tabs {
		tabs = append(tabs, t)
	}
	b.mu.Unlock()
	b.pool.close()
	for _, t := range tabs {
		t.shutdown()
	}
	b.cancel()
	b.wg.Wait()
	if b.auditFile != nil {
		b.auditFile.close()
	}
	return nil
}

func (b *Bridge) newToken(prefix string) string {
	return prefix + strconv.FormatUint(b.nextID.Add(1), 10)
}

// releaseMemory returns freed memory to the OS after a large message (see
// Options.ReleaseAfter). The message's buffers are garbage once it is sent.
func (b *Bridge) releaseMemory(parts [][]byte) {
	if b.opts.ReleaseAfter < 0 {
		return
	}
	if msgSize(parts) >= b.opts.ReleaseAfter {
		b.freeOSMemory()
	}
}

// freeOSMemory hands freed memory back to the OS, in the bulk lane.
func (b *Bridge) freeOSMemory() {
	place := b.lane.acquire()
	debug.FreeOSMemory()
	place.release()
}

// snapshot returns the configuration: the Catalog's answer from a read that
// began less than maxAge ago, or a new read (always, when maxAge is not
// positive). A call checks its server often; the Catalog may stat a score
// of files, under a lock of its own, to answer.
//
// With maxAge positive (a call checking its server) it never waits for the
// Catalog once it has an answer: a stale one is refreshed on a goroutine
// of its own and returned meanwhile, so that a configuration that is slow
// to read (a jupyter_server_config.py that sleeps) never delays a call to
// a connected server.
func (b *Bridge) snapshot(ctx context.Context, maxAge time.Duration) Snapshot {
	if maxAge > 0 {
		b.snapMu.Lock()
		snap, at := b.snap, b.snapAt
		if !at.IsZero() && time.Since(at) >= maxAge && !b.snapRefreshing && b.ctx.Err() == nil {
			b.snapRefreshing = true
			b.wg.Add(1) // a tab is open (the caller's), so Close is not waiting yet
			go func() {
				defer b.wg.Done()
				b.snapshot(b.ctx, 0)
				b.snapMu.Lock()
				b.snapRefreshing = false
				b.snapMu.Unlock()
			}()
		}
		b.snapMu.Unlock()
		if !at.IsZero() {
			return snap
		}
	}
	start := time.Now()
	snap := b.opts.Catalog.Snapshot(ctx)
	b.snapMu.Lock()
	if start.After(b.snapAt) {
		b.snap, b.snapAt = snap, start
	}
	b.snapMu.Unlock()
	return snap
}
