package bridge

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The bridge's metrics, in the Prometheus text format at
// {base}megane/builder-tools/metrics (routes.go), each Bridge with a
// registry of its own. Every label value comes from the configuration
// (server names), from a server's own listing (tool names) or from the
// bridge's closed lists (outcomes, states, close codes), never from a
// page, and their number and length are bounded: past metricsServerCap
// server names or metricsToolCap tool names of one server, for a name over
// metricsLabelMax bytes or with control characters, and for a tool the
// server does not list, the value is "other".

// Call outcomes: the label of megane_bridge_calls_total and the audit
// record's outcome.
const (
	outcomeOK        = "ok"         // a result
	outcomeToolError = "tool_error" // a result with isError true
	outcomeCancelled = "cancelled"  // by the page, its disconnect or its close
	outcomeTimedOut  = "timed_out"  // the call's timeout passed
	outcomeRefused   = "refused"    // answered by the bridge without reaching the server
	outcomeFailed    = "failed"     // the server failed, or its result was refused
)

const (
	metricsServerCap = 256 // server names with labels of their own
	metricsToolCap   = 64  // tool names with labels of their own, per server
	metricsLabelMax  = 128 // bytes of a server or tool name with a label of its own
	labelOther       = "other"
)

// labelable reports whether a name may be a label value of its own: short,
// valid UTF-8 and without control characters. A server listing 64 tools
// named with 256 KiB each made every scrape 228 MB; such names, and odd
// ones, count as "other".
func labelable(name string) bool {
	if name == "" || len(name) > metricsLabelMax || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

type meters struct {
	reg     *prometheus.Registry
	handler http.Handler
	// totals holds only calls and callBytes, which every tools:servers
	// reply reads: a page may ask for the list as often as it likes, and
	// gathering reg (the go_* and process_* collectors read /proc) per
	// request slowed the tab's reader enough to stall a page's writes.
	totals *prometheus.Registry

	calls     *prometheus.CounterVec   // server, tool, outcome
	duration  *prometheus.HistogramVec // server, tool
	callBytes *prometheus.CounterVec   // server, direction
	pageBytes *prometheus.CounterVec   // direction
	starts    *prometheus.CounterVec   // server
	failures  *prometheus.CounterVec   // server
	restarts  *prometheus.CounterVec   // server
	refusals  *prometheus.CounterVec   // code
	connects  *prometheus.CounterVec   // server, outcome

	resumes         prometheus.Counter     // page sessions resumed
	resumesRefused  *prometheus.CounterVec // code
	pagesEnded      *prometheus.CounterVec // why: grace, bound
	outcomesDropped prometheus.Counter     // results replaced by a dropped error while their page was away

	pageIn, pageOut prometheus.Counter // pageBytes' two series, resolved once

	mu      sync.Mutex
	servers map[string]map[string]struct{} // guarded by mu; server names given labels, and each one's tool names
	started map[string]bool                // guarded by mu; server names started at least once (restarts)
}

func newMetrics(b *Bridge) *meters {
	m := &meters{
		reg:     prometheus.NewRegistry(),
		totals:  prometheus.NewRegistry(),
		servers: map[string]map[string]struct{}{},
		started: map[string]bool{},
	}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "megane_bridge_calls_total",
		Help: "tools:call requests answered, by server, tool and outcome (ok, tool_error, cancelled, timed_out, refused, failed).",
	}, []string{"server", "tool", "outcome"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "megane_bridge_call_duration_seconds",
		Help:    "Time from a tools:call's arrival to its answer, for calls that reached the server.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800},
	}, []string{"server", "tool"})
	m.callBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "megane_bridge_call_bytes_total",
		Help: "Bytes of call arguments sent to servers (direction to_server) and of results received from them (from_server).",
	}, []string{"server", "direction"})
	m.pageBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "megane_bridge_page_bytes_total",
		Help: "Bytes of WebSocket messages received from pages and sent to them.",
	}, []string{"direction"})
	m.starts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "megane_bridge_server_starts_total",
		Help: "Starts of a tool server's session (a process started, or a Streamable HTTP session opened).",
	}, []string{"server"})
	m.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "megane_bridge_server_failures_total",
		Help: "Sessions that failed to start or ended on their own (a crash, a server that stopped answering).",
	}, []string{"server"})
	m.restarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "megane_bridge_server_restarts_total",
		Help: "Starts of a server after its first since the bridge started.",
	}, []string{"server"})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "megane_bridge_refusals_total",
		Help: "Sockets refused at admission or closed by the bridge, by WebSocket close code (http_NNN: refused with that HTTP status before the upgrade).",
	}, []string{"code"})
	m.connects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "megane_bridge_connects_total",
		Help: "tools:connect requests answered, by server and outcome (ok, refused, cancelled, failed).",
	}, []string{"server", "outcome"})
	m.resumes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "megane_bridge_page_resumes_total",
		Help: "Page sessions resumed by a new socket after their socket dropped.",
	})
	m.resumesRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "megane_bridge_page_resumes_refused_total",
		Help: "Resumes refused, by error code (session-unknown: ended, expired or another person's; session-in-use; bad-request).",
	}, []string{"code"})
	m.pagesEnded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "megane_bridge_page_sessions_ended_away_total",
		Help: "Page sessions that ended while their page was away, and why (grace: resume_grace passed; bound: max_away, max_away_per_user or away_memory).",
	}, []string{"why"})
	m.outcomesDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "megane_bridge_outcomes_dropped_total",
		Help: "Call results replaced by a dropped error while their page was away, to stay within away_memory.",
	})
	m.pageIn = m.pageBytes.WithLabelValues("received")
	m.pageOut = m.pageBytes.WithLabelValues("sent")

	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	m.totals.MustRegister(m.calls, m.callBytes)
	m.reg.MustRegister(m.calls, m.duration, m.callBytes, m.pageBytes, m.starts, m.failures, m.restarts, m.refusals, m.connects,
		m.resumes, m.resumesRefused, m.pagesEnded, m.outcomesDropped,
		gauge("megane_bridge_pages_away", "Page sessions whose socket dropped, within their grace.", func() float64 {
			return float64(len(b.awayTabs(nil)))
		}),
		gauge("megane_bridge_page_held_messages", "Messages held for pages with a page session: sent and not yet acknowledged, and for pages away, not sent yet.", func() float64 {
			n, _ := b.heldTotals()
			return float64(n)
		}),
		gauge("megane_bridge_page_held_bytes", "Bytes of megane_bridge_page_held_messages (counted in megane_bridge_outbound_bytes too).", func() float64 {
			_, n := b.heldTotals()
			return float64(n)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "megane_bridge_info", Help: "The bridge's version, as a label; always 1.",
			ConstLabels: prometheus.Labels{"version": b.opts.Version}}, func() float64 { return 1 }),
		gauge("megane_bridge_tabs_open", "Page sockets open.", func() float64 {
			away := len(b.awayTabs(nil))
			b.mu.Lock()
			defer b.mu.Unlock()
			return float64(len(b.tabs) - away)
		}),
		gauge("megane_bridge_chunk_memory_bytes", "Bytes declared by incomplete inbound chunk sequences, all tabs.",
			func() float64 { return float64(b.chunks.used.Load()) }),
		gauge("megane_bridge_chunk_memory_limit_bytes", "The bound of megane_bridge_chunk_memory_bytes (chunk_memory).",
			func() float64 { return float64(b.chunks.limit) }),
		gauge("megane_bridge_outbound_bytes", "Bytes queued for all tabs.",
			func() float64 { return float64(b.queued.Load()) }),
		gauge("megane_bridge_outbound_limit_bytes", "The bound of megane_bridge_outbound_bytes (outbound_total).",
			func() float64 { return float64(b.opts.OutboundTotal) }),
		gauge("megane_bridge_inbound_memory_bytes", "Bytes of the frames pages are still sending, all tabs.",
			func() float64 {
				b.inbound.mu.Lock()
				defer b.inbound.mu.Unlock()
				return float64(b.inbound.used)
			}),
		gauge("megane_bridge_inbound_memory_limit_bytes", "The bound of megane_bridge_inbound_memory_bytes (inbound_memory).",
			func() float64 { return float64(b.inbound.limit) }),
		gauge("megane_bridge_result_memory_bytes", "Bytes of tool servers' answers being read or held for their calls.",
			func() float64 { used, _, _ := b.results.inUse(); return float64(used) }),
		gauge("megane_bridge_result_memory_garbage_bytes", "Bytes of answers handed back that the collector may not have freed yet: counted against result_memory until it has.",
			func() float64 { _, garbage, _ := b.results.inUse(); return float64(garbage) }),
		gauge("megane_bridge_result_memory_peak_bytes", "The most megane_bridge_result_memory_bytes and its garbage have been together since the bridge started.",
			func() float64 { _, _, peak := b.results.inUse(); return float64(peak) }),
		gauge("megane_bridge_result_memory_limit_bytes", "The bound of megane_bridge_result_memory_bytes and its garbage (result_memory).",
			func() float64 { return float64(b.results.limit) }),
		gauge("megane_bridge_memory_bytes", "Memory the Go runtime holds from the system.",
			func() float64 { return float64(b.mem.bytes()) }),
		gauge("megane_bridge_memory_limit_bytes", "The memory ceiling (memory_limit); 0 when there is none.",
			func() float64 { return float64(b.MemoryLimit()) }),
		gauge("megane_bridge_memory_ceiling_refusing", "1 while the last check found the bridge near its memory ceiling and refused new work, else 0.",
			func() float64 {
				if b.mem.refusing.Load() {
					return 1
				}
				return 0
			}),
		sessionsCollector{b},
		// The process's own: go_goroutines, go_memstats_*, process_open_fds, ….
		// go_sched_latencies_seconds is how long ready goroutines waited
		// for a processor: where a busy bridge's delays come from.
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// sessionsCollector reports megane_bridge_sessions: the sessions by server
// and state, read at the scrape, with a zero for every state of every
// configured server so that a graph never has gaps.
type sessionsCollector struct{ b *Bridge }

var sessionsDesc = prometheus.NewDesc("megane_bridge_sessions",
	"MCP sessions by server and state (starting, connected, failed, stopped).", []string{"server", "state"}, nil)

func (c sessionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sessionsDesc }

func (c sessionsCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	counts := map[[2]string]int{}
	b.snapMu.Lock()
	for _, s := range b.snap.Servers {
		for _, st := range []string{stateStarting, stateConnected, stateFailed, stateStopped} {
			counts[[2]string{b.metrics.server(s.Name), st}] += 0
		}
	}
	b.snapMu.Unlock()
	b.pool.mu.Lock()
	for _, s := range b.pool.sessions {
		counts[[2]string{b.metrics.server(s.spec.Name), s.state()}]++
	}
	b.pool.mu.Unlock()
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
}

// server is the label of a configured server's name.
func (m *meters) server(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.servers[name]; ok {
		return name
	}
	if len(m.servers) >= metricsServerCap || !labelable(name) {
		return labelOther
	}
	m.servers[name] = map[string]struct{}{}
	return name
}

// labels are the server and tool labels of a call of tool on server; the
// tool is "other" unless listed (in the session's listing).
func (m *meters) labels(server, tool string, listed bool) (string, string) {
	server = m.server(server)
	if !listed || server == labelOther {
		return server, labelOther
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	tools := m.servers[server]
	if _, ok := tools[tool]; ok {
		return server, tool
	}
	if len(tools) >= metricsToolCap || !labelable(tool) {
		return server, labelOther
	}
	tools[tool] = struct{}{}
	return server, tool
}

// callDone counts one answered call. server and tool are already labels.
func (m *meters) callDone(server, tool, outcome string, ran bool, elapsed time.Duration, in, out int64) {
	m.calls.WithLabelValues(server, tool, outcome).Inc()
	if !ran {
		return
	}
	m.duration.WithLabelValues(server, tool).Observe(elapsed.Seconds())
	if in > 0 {
		m.callBytes.WithLabelValues(server, "to_server").Add(float64(in))
	}
	if out > 0 {
		m.callBytes.WithLabelValues(server, "from_server").Add(float64(out))
	}
}

// sessionStarted counts a start, and a restart when the name started before.
func (m *meters) sessionStarted(name string) {
	l := m.server(name)
	m.starts.WithLabelValues(l).Inc()
	m.mu.Lock()
	again := m.started[name]
	if !again && len(m.started) < metricsServerCap {
		m.started[name] = true
	}
	m.mu.Unlock()
	if again {
		m.restarts.WithLabelValues(l).Inc()
	}
}

func (m *meters) sessionFailed(name string) { m.failures.WithLabelValues(m.server(name)).Inc() }

func (m *meters) resumeRefused(code string) { m.resumesRefused.WithLabelValues(code).Inc() }

func (m *meters) pageEnded(why string) { m.pagesEnded.WithLabelValues(why).Inc() }

func (m *meters) refused(code int) { m.refusals.WithLabelValues(strconv.Itoa(code)).Inc() }

func (m *meters) refusedHTTP(status int) {
	m.refusals.WithLabelValues("http_" + strconv.Itoa(status)).Inc()
}

// ServerCounters are one server's call counters, as the status page shows
// them: the same counters megane_bridge_calls_total and
// megane_bridge_call_bytes_total report.
type ServerCounters struct {
	Calls    int64 `json:"calls"`    // answered, every outcome
	Failures int64 `json:"failures"` // outcomes failed, timed_out and tool_error
	BytesIn  int64 `json:"bytesIn"`  // arguments sent to the server
	BytesOut int64 `json:"bytesOut"` // results received from it
}

// ServerCounters returns the call counters of every server that has any,
// by name (server names past the label cap are summed under "other"),
// read from the two counters alone (not the whole metrics registry).
func (b *Bridge) ServerCounters() map[string]ServerCounters {
	out := map[string]ServerCounters{}
	families, err := b.metrics.totals.Gather()
	if err != nil {
		return out
	}
	for _, f := range families {
		name := f.GetName()
		if name != "megane_bridge_calls_total" && name != "megane_bridge_call_bytes_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			lv := map[string]string{}
			for _, l := range mt.GetLabel() {
				lv[l.GetName()] = l.GetValue()
			}
			v := int64(mt.GetCounter().GetValue())
			c := out[lv["server"]]
			switch {
			case name == "megane_bridge_calls_total":
				c.Calls += v
				switch lv["outcome"] {
				case outcomeFailed, outcomeTimedOut, outcomeToolError:
					c.Failures += v
				}
			case lv["direction"] == "to_server":
				c.BytesIn += v
			default:
				c.BytesOut += v
			}
			out[lv["server"]] = c
		}
	}
	return out
}

// isToolError reports whether a tools/call result says isError: true at
// its top level, the key matched exactly (as a page's JSON.parse reads
// it; the last of duplicates wins). Results can be tens of megabytes, and
// some SDKs write "isError": false in every one: only a result holding
// "isError" followed by true, as written, is decoded (so a key spelled
// with escapes, "is\u0045rror", counts as ok).
func isToolError(raw []byte) bool {
	maybe := false
	for rest := raw; !maybe; {
		i := markIsError.index(rest)
		if i < 0 {
			return false
		}
		rest = rest[i+len(markIsError.pat):]
		v := bytes.TrimLeft(rest, " \t\r\n")
		maybe = len(v) > 0 && v[0] == ':' && bytes.HasPrefix(bytes.TrimLeft(v[1:], " \t\r\n"), []byte("true"))
	}
	var r map[string]json.RawMessage
	return json.Unmarshal(raw, &r) == nil && string(r["isError"]) == "true"
}

// directFromLoopback reports whether r came straight from this machine to
// the bridge's own port: a TCP peer on a loopback address, a Host naming
// the port the request arrived on, and no proxy's forwarding header.
// jupyter-server-proxy also connects from loopback and adds no forwarding
// header, but it passes on the Host the browser sent, which names the
// Jupyter server's port, never the bridge's.
func directFromLoopback(r *http.Request) bool {
	if r.Header.Get("X-Forwarded-For") != "" || r.Header.Get("Forwarded") != "" || r.Header.Get("X-Real-Ip") != "" {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return false
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	_, localPort, err := net.SplitHostPort(local.String())
	if err != nil {
		return false
	}
	// The Host must name this machine's loopback as well as the port: a
	// page on a name of the attacker's that resolves to 127.0.0.1 (DNS
	// rebinding) sends its own name, and is refused here as it is by
	// every other route.
	hostName, hostPort, err := net.SplitHostPort(r.Host)
	loopbackName := LoopbackHost(hostName) || strings.HasSuffix(strings.ToLower(hostName), ".localhost")
	return err == nil && hostPort == localPort && loopbackName
}

// serveMetrics answers a scrape: without a credential when
// Options.MetricsPublicOnLoopback allows it for a direct request from this
// machine, else when the Gate admits it as it admits the status page.
func (b *Bridge) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if !(b.opts.MetricsPublicOnLoopback && directFromLoopback(r)) {
		if _, refusal := b.opts.Gate.Admit(r.Context(), r); refusal != nil {
			status := refusal.HTTPStatus
			if status == 0 {
				status = http.StatusForbidden
			}
			http.Error(w, refusal.Reason, status)
			return
		}
	}
	b.metrics.handler.ServeHTTP(w, r)
}
