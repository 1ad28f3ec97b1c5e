package bridge_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// scripted is what a scripted session did, for the tests that check the
// metrics and the audit record against it.
type scripted struct {
	h    *harness
	spec bridge.ServerSpec
	// argsSent: the arguments' JSON of each call that reached the server,
	// as the page sent them.
	argsSent [][]byte
	secret   string // an argument value that must appear nowhere
}

// runScriptedSession connects a page to a real tool server and makes
// calls of every outcome, a call the bridge refuses, a crash and a
// restart, and a second socket that the bridge closes (binary frame).
func runScriptedSession(t *testing.T, opts bridge.Options) *scripted {
	t.Helper()
	spec := fakeServer(t, "lab", bridgetest.Mode{})
	h := newHarness(t, opts, spec)
	ctx := testCtx(t, 60*time.Second)
	sc := &scripted{h: h, spec: spec, secret: "hunter2-do-not-record"}
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)

	call := func(id int, tool string, args map[string]any, extra map[string]any) *bridgetest.Msg {
		t.Helper()
		req := map[string]any{"type": "tools:call", "id": id, "server": "lab", "tool": tool, "arguments": args}
		for k, v := range extra {
			req[k] = v
		}
		raw, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		if tool != "nope" {
			sc.argsSent = append(sc.argsSent, raw)
		}
		if err := p.Send(req); err != nil {
			t.Fatal(err)
		}
		r, err := p.Reply(ctx, "tools:call", id)
		if err != nil {
			t.Fatalf("call %s: %v", tool, err)
		}
		return r
	}
	mustOK(t, call(10, "echo", map[string]any{"password": sc.secret, "n": 1}, nil))
	if r := call(11, "toolerror", map[string]any{"tag": "x"}, nil); !strings.Contains(r.String(), `"isError":true`) {
		t.Fatalf("toolerror: %s", r)
	}
	mustErr(t, call(12, "fail", map[string]any{"message": "no"}, nil), bridge.CodeServerFailed)
	mustErr(t, call(13, "slow", map[string]any{"steps": 1000, "intervalMs": 20}, map[string]any{"timeoutMs": 100}), bridge.CodeTimeout)

	// Cancelled: the page cancels a slow call once its progress shows.
	slowArgs := map[string]any{"steps": 1000, "intervalMs": 20, "tag": "c"}
	raw, _ := json.Marshal(slowArgs)
	sc.argsSent = append(sc.argsSent, raw)
	if err := p.Send(map[string]any{"type": "tools:call", "id": 14, "server": "lab", "tool": "slow", "arguments": slowArgs}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" && string(m.ID) == "14" }); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Request(ctx, map[string]any{"type": "tools:cancel", "id": 14}); err != nil {
		t.Fatal(err)
	}
	if r, err := p.Reply(ctx, "tools:call", 14); err != nil {
		t.Fatal(err)
	} else {
		mustErr(t, r, bridge.CodeCancelled)
	}

	// Refused: a tool the server does not list, and a server the tab is
	// not connected to (the page's names must not become labels).
	mustErr(t, call(15, "nope", map[string]any{"password": sc.secret}, nil), bridge.CodeUnknownTool)
	r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 16, "server": "ghost-from-page", "tool": "echo"})
	if err != nil {
		t.Fatal(err)
	}
	mustErr(t, r, bridge.CodeNotConnected)

	// A crash ends the session (failed); a new connect restarts the server.
	mustErr(t, call(17, "crash", map[string]any{}, nil), bridge.CodeServerFailed)
	if _, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:closed" }); err != nil {
		t.Fatal(err)
	}
	connect(t, ctx, p, 2, spec)
	mustOK(t, call(18, "echo", map[string]any{"n": 2}, nil))

	// A second socket the bridge closes with 4400 (a binary frame).
	p2 := h.page(ctx)
	if err := p2.Conn.WriteMessage(websocket.BinaryMessage, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p2.Done():
	case <-ctx.Done():
		t.Fatal("the bridge did not close a socket that sent a binary frame")
	}
	// Its tab is gone once tabs_open says 1 again.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && value(scrape(t, h.srv.URL+"/megane/builder-tools/metrics", nil), "megane_bridge_tabs_open", nil) != 1 {
		time.Sleep(20 * time.Millisecond)
	}
	return sc
}

// scrape GETs url and parses it with the client library's own text parser.
func scrape(t *testing.T, url string, header http.Header) map[string]*dto.MetricFamily {
	t.Helper()
	body, status := getURL(t, url, header)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the metrics do not parse: %v\n%s", err, body)
	}
	return fams
}

func getURL(t *testing.T, url string, header http.Header) (string, int) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}

// value is the sample of family name whose labels include want: a
// counter's or gauge's value, a histogram's count; -1 when there is none.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

// TestMetricsCountWhatHappened: a scrape after a scripted session shows
// every call by server, tool and outcome, the server's starts, failure
// and restart, the bytes, the refusal by close code and the bounds, at
// both paths; no label holds a name a page made up.
func TestMetricsCountWhatHappened(t *testing.T) {
	sc := runScriptedSession(t, bridge.Options{})
	base := sc.h.srv.URL
	fams := scrape(t, base+"/megane/builder-tools/metrics", nil)
	calls := func(tool, outcome string) float64 {
		return value(fams, "megane_bridge_calls_total", map[string]string{"server": "lab", "tool": tool, "outcome": outcome})
	}
	for _, c := range []struct {
		tool, outcome string
		want          float64
	}{
		{"echo", "ok", 2}, {"toolerror", "tool_error", 1}, {"fail", "failed", 1}, {"slow", "timed_out", 1},
		{"slow", "cancelled", 1}, {"other", "refused", 1}, {"crash", "failed", 1},
	} {
		if got := calls(c.tool, c.outcome); got != c.want {
			t.Errorf("calls_total{server=lab,tool=%s,outcome=%s} = %v, want %v", c.tool, c.outcome, got, c.want)
		}
	}
	if got := value(fams, "megane_bridge_calls_total", map[string]string{"server": "other", "tool": "other", "outcome": "refused"}); got != 1 {
		t.Errorf("the call to a server the tab had not connected: calls_total{server=other,tool=other,outcome=refused} = %v, want 1", got)
	}
	if got := value(fams, "megane_bridge_call_duration_seconds", map[string]string{"server": "lab", "tool": "echo"}); got != 2 {
		t.Errorf("call_duration_seconds{lab,echo} count = %v, want 2", got)
	}
	wantIn := 0
	for _, a := range sc.argsSent {
		wantIn += len(a)
	}
	if got := value(fams, "megane_bridge_call_bytes_total", map[string]string{"server": "lab", "direction": "to_server"}); got != float64(wantIn) {
		t.Errorf("call_bytes_total{lab,to_server} = %v, want %d (the arguments of the calls that ran)", got, wantIn)
	}
	if got := value(fams, "megane_bridge_call_bytes_total", map[string]string{"server": "lab", "direction": "from_server"}); got <= 0 {
		t.Errorf("call_bytes_total{lab,from_server} = %v, want > 0", got)
	}
	for _, dir := range []string{"received", "sent"} {
		if got := value(fams, "megane_bridge_page_bytes_total", map[string]string{"direction": dir}); got <= 0 {
			t.Errorf("page_bytes_total{%s} = %v, want > 0", dir, got)
		}
	}
	for name, want := range map[string]float64{
		"megane_bridge_server_starts_total":   2,
		"megane_bridge_server_failures_total": 1,
		"megane_bridge_server_restarts_total": 1,
	} {
		if got := value(fams, name, map[string]string{"server": "lab"}); got != want {
			t.Errorf("%s{server=lab} = %v, want %v", name, got, want)
		}
	}
	if got := value(fams, "megane_bridge_connects_total", map[string]string{"server": "lab", "outcome": "ok"}); got != 2 {
		t.Errorf("connects_total{lab,ok} = %v, want 2", got)
	}
	if got := value(fams, "megane_bridge_refusals_total", map[string]string{"code": "4400"}); got != 1 {
		t.Errorf("refusals_total{code=4400} = %v, want 1", got)
	}
	if got := value(fams, "megane_bridge_sessions", map[string]string{"server": "lab", "state": "connected"}); got != 1 {
		t.Errorf("sessions{lab,connected} = %v, want 1", got)
	}
	if got := value(fams, "megane_bridge_sessions", map[string]string{"server": "lab", "state": "starting"}); got != 0 {
		t.Errorf("sessions{lab,starting} = %v, want 0", got)
	}
	for name, want := range map[string]float64{
		"megane_bridge_tabs_open":                  1,
		"megane_bridge_chunk_memory_limit_bytes":   (3*(256<<20) + 256<<20) / 8,
		"megane_bridge_outbound_limit_bytes":       1 << 30,
		"megane_bridge_memory_limit_bytes":         3*(256<<20) + 256<<20,
		"megane_bridge_memory_ceiling_refusing":    0,
		"megane_bridge_chunk_memory_bytes":         0,
		"megane_bridge_inbound_memory_limit_bytes": (3*(256<<20) + 256<<20) / 8,
		"megane_bridge_result_memory_limit_bytes":  (256<<20)*5/4 + 1<<20,
		"megane_bridge_result_memory_bytes":        0,
	} {
		if got := value(fams, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := value(fams, "go_goroutines", nil); got <= 0 {
		t.Errorf("go_goroutines = %v: the process's own metrics are missing", got)
	}
	if got := value(fams, "go_sched_latencies_seconds", nil); got <= 0 {
		t.Errorf("go_sched_latencies_seconds has %v samples: an admin cannot see whether the bridge waits for a processor", got)
	}
	if got := value(fams, "megane_bridge_memory_bytes", nil); got <= 0 {
		t.Errorf("memory_bytes = %v", got)
	}
	body, _ := getURL(t, base+"/megane/builder-tools/metrics", nil)
	for _, bad := range []string{"ghost-from-page", "nope", sc.secret} {
		if strings.Contains(body, bad) {
			t.Errorf("the metrics hold %q, which a page sent", bad)
		}
	}
	// The path jupyter-server-proxy forwards with absolute_url false.
	if got := value(scrape(t, base+"/builder-tools/metrics", nil), "megane_bridge_calls_total",
		map[string]string{"server": "lab", "tool": "echo", "outcome": "ok"}); got != 2 {
		t.Errorf("the stripped path: calls_total{lab,echo,ok} = %v, want 2", got)
	}
	// The status page's counters come from the same registry.
	c := sc.h.b.ServerCounters()["lab"]
	if c.Calls != 8 || c.Failures != 4 || c.BytesIn != int64(wantIn) || c.BytesOut <= 0 {
		t.Errorf("ServerCounters()[lab] = %+v, want 8 calls, 4 failures, %d bytes in", c, wantIn)
	}
}

// refuseScrape refuses every request as a Jupyter gate refuses one without a
// credential.
type refuseScrape struct{}

func (refuseScrape) Admit(context.Context, *http.Request) (bridge.Admission, *bridge.Refusal) {
	return bridge.Admission{}, &bridge.Refusal{HTTPStatus: http.StatusUnauthorized, Reason: "log in to Jupyter first"}
}

// TestMetricsPublicOnLoopback: with the switch, a scrape without a
// credential made directly from 127.0.0.1 to the bridge's port is served;
// one that came through a proxy (a forwarding header, or the Host of
// another port, as jupyter-server-proxy passes it on), one from another
// address, and any when the switch is off go through the Gate and are
// refused.
func TestMetricsPublicOnLoopback(t *testing.T) {
	on := newHarness(t, bridge.Options{Gate: refuseScrape{}, MetricsPublicOnLoopback: true})
	if !strings.HasPrefix(on.srv.URL, "http://127.0.0.1:") {
		t.Fatalf("the test server is not on 127.0.0.1: %s", on.srv.URL)
	}
	if got := value(scrape(t, on.srv.URL+"/megane/builder-tools/metrics", nil), "megane_bridge_tabs_open", nil); got != 0 {
		t.Errorf("tabs_open = %v, want 0", got)
	}
	// A socket the Gate refuses is counted by its status.
	if _, resp, err := bridgetest.Dial(testCtx(t, 10*time.Second), "ws"+strings.TrimPrefix(on.srv.URL, "http")+"/megane/builder-tools/ws", nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a socket without a credential: %v %v, want 401", resp, err)
	}
	if got := value(scrape(t, on.srv.URL+"/builder-tools/metrics", nil), "megane_bridge_refusals_total", map[string]string{"code": "http_401"}); got != 1 {
		t.Errorf("refusals_total{code=http_401} = %v, want 1", got)
	}
	for _, hdr := range []string{"X-Forwarded-For", "Forwarded", "X-Real-Ip"} {
		if _, status := getURL(t, on.srv.URL+"/megane/builder-tools/metrics", http.Header{hdr: {"203.0.113.7"}}); status != http.StatusUnauthorized {
			t.Errorf("a proxied scrape (%s) without a credential: status %d, want 401", hdr, status)
		}
	}
	// Through jupyter-server-proxy: from loopback, no forwarding header, but
	// the Host the browser sent, naming Jupyter's port.
	req, _ := http.NewRequest(http.MethodGet, on.srv.URL+"/builder-tools/metrics", nil)
	req.Host = "localhost:8888"
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a scrape through jupyter-server-proxy (Host localhost:8888) without a credential: status %d, want 401", resp.StatusCode)
		}
	}
	// A DNS-rebinding page: from loopback, the right port, but a Host of
	// the attacker's name. Loopback names with the right port are served.
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(on.srv.URL, "http://"))
	for host, want := range map[string]int{"evil.example:" + port: http.StatusUnauthorized, "127.0.0.2.nip.io:" + port: http.StatusUnauthorized,
		"localhost:" + port: http.StatusOK, "prom.localhost:" + port: http.StatusOK, "[::1]:" + port: http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, on.srv.URL+"/megane/builder-tools/metrics", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("a scrape from loopback with Host %s: status %d, want %d", host, resp.StatusCode, want)
		}
	}
	t.Logf("abuse: a DNS-rebinding page scrapes /metrics from loopback with Host evil.example:PORT, public_on_loopback on | refused unless the Host names loopback | 401 for evil.example and nip.io, 200 for localhost, *.localhost, [::1]")
	// The status page itself stays behind the Gate.
	if _, status := getURL(t, on.srv.URL+"/megane/builder-tools/", nil); status == http.StatusOK {
		t.Errorf("the status page was served without a credential")
	}
	off := newHarness(t, bridge.Options{Gate: refuseScrape{}})
	if _, status := getURL(t, off.srv.URL+"/megane/builder-tools/metrics", nil); status != http.StatusUnauthorized {
		t.Errorf("switch off, from loopback: status %d, want 401", status)
	}

	// From this machine's own non-loopback address.
	ip := nonLoopbackIP(t)
	if ip == nil {
		t.Skip("this machine has no non-loopback address to scrape from")
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	b := bridge.New(bridge.Options{Catalog: bridge.StaticCatalog{}, Gate: refuseScrape{}, MetricsPublicOnLoopback: true})
	srv := httptest.NewUnstartedServer(b)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(func() { srv.Close(); b.Close() })
	if _, status := getURL(t, srv.URL+"/megane/builder-tools/metrics", nil); status != http.StatusUnauthorized {
		t.Errorf("a scrape from %s without a credential: status %d, want 401", ip, status)
	}
}

func nonLoopbackIP(t *testing.T) net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
			return n.IP
		}
	}
	return nil
}

// auditLines reads the audit file's records.
func auditLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	s := bufio.NewScanner(f)
	for s.Scan() {
		var m map[string]any
		if err := json.Unmarshal(s.Bytes(), &m); err != nil {
			t.Fatalf("%s: a line is not JSON: %v: %s", path, err, s.Text())
		}
		out = append(out, m)
	}
	return out
}

func ownerOnly(t *testing.T, path string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		return
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, st.Mode().Perm())
	}
}

// TestAuditRecordsEveryCall: after the scripted session, the audit file
// holds one line per call with the user, server, fingerprint, tool,
// SHA-256 of the arguments, outcome, duration, bytes and id, never an
// argument's value; and the socket, the connects, the confirmations and
// the refusal. The file is owner-only.
func TestAuditRecordsEveryCall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	sc := runScriptedSession(t, bridge.Options{AuditFile: path})
	sc.h.b.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), sc.secret) {
		t.Fatalf("the audit file holds an argument's value")
	}
	if strings.Contains(sc.h.logBuf.String(), sc.secret) {
		t.Fatalf("the log holds an argument's value")
	}
	ownerOnly(t, path)
	recs := auditLines(t, path)
	events := map[string]int{}
	var calls []map[string]any
	for _, r := range recs {
		events[r["event"].(string)]++
		if r["event"] == "call" {
			calls = append(calls, r)
		}
	}
	if len(calls) != 9 {
		t.Fatalf("%d call records, want 9 (one per call):\n%s", len(calls), data)
	}
	if events["open"] != 2 || events["connect"] != 2 || events["confirm"] != 2 || events["refused"] != 1 {
		t.Errorf("events %v, want 2 open, 2 connect, 2 confirm, 1 refused", events)
	}
	digest := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	first := calls[0]
	for k, want := range map[string]any{"user": "alice", "server": "lab", "fingerprint": sc.spec.Fingerprint, "tool": "echo",
		"outcome": "ok", "id": "10", "args_sha256": digest(sc.argsSent[0]), "bytes_in": float64(len(sc.argsSent[0]))} {
		if first[k] != want {
			t.Errorf("the first call's %s = %v, want %v", k, first[k], want)
		}
	}
	if first["bytes_out"].(float64) <= 0 || first["duration_ms"].(float64) <= 0 {
		t.Errorf("the first call's bytes_out and duration_ms: %v %v", first["bytes_out"], first["duration_ms"])
	}
	if _, err := time.Parse(time.RFC3339Nano, first["time"].(string)); err != nil {
		t.Errorf("time: %v", err)
	}
	outcomes := []string{}
	for _, c := range calls {
		outcomes = append(outcomes, c["outcome"].(string))
	}
	if got, want := strings.Join(outcomes, " "), "ok tool_error failed timed_out cancelled refused refused failed ok"; got != want {
		t.Errorf("outcomes in order: %s, want %s", got, want)
	}
	// The audit line is logged too.
	if n := strings.Count(sc.h.logBuf.String(), "msg=audit event=call"); n != 9 {
		t.Errorf("%d audit log lines for calls, want 9", n)
	}
}

// echoCalls connects a page to a fresh tool server and makes n echo calls,
// each answered ok.
func echoCalls(t *testing.T, opts bridge.Options, n int) *harness {
	t.Helper()
	spec := fakeServer(t, "lab", bridgetest.Mode{})
	h := newHarness(t, opts, spec)
	ctx := testCtx(t, 60*time.Second)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	for i := range n {
		r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 100 + i, "server": "lab", "tool": "echo",
			"arguments": map[string]any{"i": i}})
		if err != nil {
			t.Fatal(err)
		}
		mustOK(t, r)
	}
	return h
}

// TestAuditRotatesBySize: a file that would pass AuditMaxBytes is moved to
// .1 (and .1 to .2), AuditKeep rotated files are kept, every file stays
// within the size and owner-only, and the newest holds the last call.
func TestAuditRotatesBySize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	const max = 1500
	h := echoCalls(t, bridge.Options{AuditFile: path, AuditMaxBytes: max, AuditKeep: 2}, 20)
	h.b.Close()
	for _, p := range []string{path, path + ".1", path + ".2"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if st.Size() > max || st.Size() == 0 {
			t.Errorf("%s is %d bytes, want 1 to %d", p, st.Size(), max)
		}
		ownerOnly(t, p)
		auditLines(t, p) // every line is whole JSON
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Errorf("%s.3 exists (AuditKeep is 2): %v", path, err)
	}
	recs := auditLines(t, path)
	if last := recs[len(recs)-1]; last["event"] != "call" || last["id"] != "119" {
		t.Errorf("the newest file's last record is %v, want the last call (id 119)", last)
	}
	// Oldest file first, the records are in the order the calls were answered.
	prev := 0
	for _, p := range []string{path + ".2", path + ".1", path} {
		for _, r := range auditLines(t, p) {
			if r["event"] != "call" {
				continue
			}
			id, _ := strconv.Atoi(r["id"].(string))
			if id <= prev {
				t.Errorf("%s: the record of call %d follows that of call %d", p, id, prev)
			}
			prev = id
		}
	}
}

// TestAuditWriteFailureNeverFailsACall: with the audit file's directory
// gone, calls are answered as ever, the failure is logged once, the
// records still reach the log; once the directory is back, the file is
// written again.
func TestAuditWriteFailureNeverFailsACall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "audit.jsonl")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	spec := fakeServer(t, "lab", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{AuditFile: path}, spec)
	ctx := testCtx(t, 60*time.Second)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	call := func(id int) {
		t.Helper()
		r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": id, "server": "lab", "tool": "echo", "arguments": map[string]any{"id": id}})
		if err != nil {
			t.Fatal(err)
		}
		mustOK(t, r)
	}
	call(10)
	call(11)
	// A call's record is written before its answer is sent.
	logs := h.logBuf.String()
	if n := strings.Count(logs, "cannot write the audit file"); n != 1 {
		t.Errorf("the write failure was logged %d times, want once:\n%s", n, logs)
	}
	if n := strings.Count(logs, "msg=audit event=call"); n != 2 {
		t.Errorf("%d audit log lines for calls, want 2", n)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	call(12)
	h.b.Close() // every record written
	if !strings.Contains(h.logBuf.String(), "the audit file can be written again") {
		t.Errorf("the recovery was not logged")
	}
	recs := auditLines(t, path)
	if len(recs) != 1 || recs[0]["id"] != "12" {
		t.Errorf("the audit file after the directory came back: %v, want the call with id 12", recs)
	}
	ownerOnly(t, path)
}
