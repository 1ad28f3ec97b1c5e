package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// mixedAbuseEnv sets TestMixedAbuse's duration (a Go duration); `make
// abuse` sets 5m. If unset, 20s.
const mixedAbuseEnv = "MEGANE_ABUSE_MIXED"

// mixedEveryEnv, when set, is the time between the legitimate page's calls
// (a Go duration), for more samples in a short diagnostic run; unset, a
// second, as the issue asks.
const mixedEveryEnv = "MEGANE_ABUSE_LEGIT_EVERY"

// mixedOnlyEnv, when set, runs only the attacks whose names contain one of
// its comma-separated words (to tell which attack costs what); unset,
// every attack.
const mixedOnlyEnv = "MEGANE_ABUSE_ONLY"

// TestMixedAbuse (issue 28): every attack of the abuse tests at once,
// against one bridge process (standalone, with the default memory ceiling
// of 1 GiB: a --servers file comes with the default admin settings), while a
// legitimate page calls a tool every second. The attacks, each in a loop
// until the end:
//
//   - stalled frames: 10 sockets each send 60 MiB of a 63 MiB frame and
//     stall;
//   - a chatty tool: 3,000 progress notifications in a tight loop, to a page
//     that reads;
//   - a page that asks for 8 MiB results and never reads;
//   - a server that forks a daemon into its own session and kills its
//     keeper;
//   - results too deep to parse, and results that are not UTF-8;
//   - 300 idle connections held open, and chunk sequences declared and
//     never finished;
//   - a Streamable HTTP server that answers with an event of endless
//     1 MiB id: and comment lines, with six 255 MiB JSON results at once,
//     or with four 255 MiB gzip-compressed ones at once.
//
// Bounds: the bridge's peak RSS (VmHWM, its own process; the tool servers
// are others) stays under the ceiling; no legitimate call fails or is
// lost; no process of the escaping server is left once the bridge is
// stopped. The legitimate call's latency is reported, quiet (before the
// attacks) and under attack, for the closing note; it is not asserted
// (speed is measured, never asserted, in tests). It is measured three ways:
// by the legitimate page, a process of its own as a browser is; by the
// bridge, from the call's arrival to its answer (its audit lines); and as
// the bridge's goroutines' waits for a processor (its
// go_sched_latencies_seconds), which tell the bridge's own scheduling from
// the machine's. After the attacks, as long as the quiet time, one process
// per core computes (a shell loop) while the page goes on calling: the
// machine's floor, what a machine whose cores are all busy gives the call
// with the bridge idle, against which the latency under attack is read.
func TestMixedAbuse(t *testing.T) {
	dur := 20 * time.Second
	if v := os.Getenv(mixedAbuseEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", mixedAbuseEnv, v, err)
		}
		dur = d
	}
	quiet := max(5*time.Second, dur/10)
	const settle = 2 * time.Second // between the attackers' end and the floor
	const ceiling = 1 << 30        // 3 × the default result limit + 256 MiB

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	marker := fmt.Sprintf("mixed-%d-%d", os.Getpid(), time.Now().UnixNano())
	server := func(mode bridgetest.Mode, extraEnv ...string) map[string]any {
		m, _ := json.Marshal(mode)
		env := map[string]string{bridgetest.EnvVar: string(m), "MEGANE_FAULT_MARK": marker}
		for i := 0; i+1 < len(extraEnv); i += 2 {
			env[extraEnv[i]] = extraEnv[i+1]
		}
		return map[string]any{"command": exe, "args": []string{"-test.run=^$"}, "env": env}
	}
	badResult := write("bad-result.json", "{\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok \xff\xfe bytes\"}]}}")
	servers, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"legit":  server(bridgetest.Mode{Name: "legit"}),
		"chatty": server(bridgetest.Mode{Name: "chatty"}),
		"big":    server(bridgetest.Mode{Name: "big"}),
		"escape": server(bridgetest.Mode{Name: "escape", SpawnDetached: true, DetachedPidFile: filepath.Join(dir, "escape.pid"), KillParent: true}),
		"latin": server(bridgetest.Mode{Name: "latin", Tools: []json.RawMessage{json.RawMessage(`{"name":"badresult","inputSchema":{"type":"object"}}`)},
			FixtureCalls: map[string]string{"badresult": badResult}}),
	}})
	// The Streamable HTTP server whose answers attack (issue 40's items
	// 1, 2 and 4), in this process, on loopback.
	hostile := &hostileHTTP{size: 255 << 20}
	hsrv := httptest.NewServer(hostile.handler(t))
	defer hsrv.Close()
	var withHTTP map[string]any
	json.Unmarshal(servers, &withHTTP)
	withHTTP["mcpServers"].(map[string]any)["hostile-http"] = map[string]any{"url": hsrv.URL + "/mcp"}
	servers, _ = json.Marshal(withHTTP)
	serversFile := write("servers.json", string(servers))
	ready := filepath.Join(dir, "ready")
	token := "mixed-abuse-token"
	pp := &programProcess{stderr: &lockedBuffer{}, exited: make(chan struct{})}
	pp.cmd = exec.Command(exe, "serve", "--standalone", "--port", "0", "--token", token,
		"--servers", serversFile, "--ready-file", ready)
	pp.cmd.Env = append(os.Environ(), asProgramEnv+"=1",
		"HOME="+filepath.Join(dir, "home"), "JUPYTER_CONFIG_DIR="+filepath.Join(dir, "config"),
		"JUPYTER_DATA_DIR="+filepath.Join(dir, "data"), "JUPYTER_RUNTIME_DIR="+filepath.Join(dir, "runtime"),
		"JUPYTER_CONFIG_PATH=", "GORACE=atexit_sleep_ms=0")
	child.InGroup(pp.cmd)
	launchProgram(t, pp, ready)
	bridgePid := pp.cmd.Process.Pid
	wsURL := "ws://" + pp.addr + "/megane/builder-tools/ws?token=" + token

	ctx, cancel := context.WithTimeout(context.Background(), dur+3*time.Minute)
	defer cancel()
	fingerprints := map[string]string{}
	{
		p, _, err := bridgetest.Dial(ctx, wsURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": 1})
		if err != nil {
			t.Fatal(err)
		}
		var list []struct{ Name, Fingerprint string }
		json.Unmarshal(r.Fields["servers"], &list)
		for _, s := range list {
			fingerprints[s.Name] = s.Fingerprint
		}
		p.Close()
	}
	connectPage := func(ctx context.Context, name string) (*bridgetest.Page, error) {
		return dialConnected(ctx, wsURL, name, fingerprints[name])
	}

	// The bridge's RSS, sampled; VmHWM at the end is the peak.
	var peakRSS atomic.Int64
	sample := func() {
		if kb := procStatusKB(bridgePid, "VmRSS:"); kb<<10 > peakRSS.Load() {
			peakRSS.Store(kb << 10)
		}
	}

	metricsURL := "http://" + pp.addr + "/megane/builder-tools/metrics?token=" + token
	schedStart := schedHistogram(ctx, metricsURL) // the bridge's start is not its quiet time

	// The legitimate page: one echo call a second, from the start, in a
	// process of its own, as a user's browser is: latency measured here
	// would include this process's scheduling of the attackers.
	start := time.Now()
	attackFrom := start.Add(quiet)
	end := attackFrom.Add(dur)
	floorFrom := end.Add(settle)
	floorEnd := floorFrom.Add(quiet)
	every := time.Second
	if v := os.Getenv(mixedEveryEnv); v != "" {
		if every, err = time.ParseDuration(v); err != nil || every <= 0 {
			t.Fatalf("%s=%q: not a positive duration", mixedEveryEnv, v)
		}
	}
	spec, _ := json.Marshal(legitPageSpec{URL: wsURL, Fingerprint: fingerprints["legit"], Until: floorEnd.UnixNano(), Every: int64(every)})
	lp := exec.CommandContext(ctx, exe, "-test.run=^$")
	lp.Env = append(os.Environ(), legitPageEnv+"="+string(spec))
	lp.Stderr = os.Stderr
	lpOut, err := lp.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.Start(); err != nil {
		t.Fatal(err)
	}
	var outcomes []legitOutcome // owned by the reader below until legitDone
	legitDone := make(chan struct{})
	go func() {
		defer close(legitDone)
		sc := bufio.NewScanner(lpOut)
		for sc.Scan() {
			var o legitOutcome
			if json.Unmarshal(sc.Bytes(), &o) == nil {
				outcomes = append(outcomes, o)
			}
		}
		if err := lp.Wait(); err != nil {
			outcomes = append(outcomes, legitOutcome{At: time.Now().UnixNano(), Err: "the legitimate page's process: " + err.Error()})
		}
	}()

	// The attackers, from attackFrom to end.
	for time.Now().Before(attackFrom) {
		sample()
		time.Sleep(100 * time.Millisecond)
	}
	schedQuiet := schedHistogram(ctx, metricsURL)
	cpuFrom := readCPUUse(bridgePid)
	actx, acancel := context.WithDeadline(ctx, end)
	defer acancel()
	var wg sync.WaitGroup
	var counts sync.Map // attack -> *atomic.Int64
	count := func(name string) {
		v, _ := counts.LoadOrStore(name, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	var violations sync.Map // a broken promise -> struct{}
	only := os.Getenv(mixedOnlyEnv)
	attack := func(name string, n int, fn func(ctx context.Context) error) {
		if only != "" && !slices.ContainsFunc(strings.Split(only, ","), func(w string) bool { return w != "" && strings.Contains(name, w) }) {
			return
		}
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for actx.Err() == nil {
					err := fn(actx)
					var v brokenPromise
					switch {
					case err == nil:
						count(name)
					case errors.As(err, &v):
						violations.Store(name+": "+v.Error(), struct{}{})
						count(name + " (broke a promise)")
					case actx.Err() == nil && time.Until(end) < time.Second:
						// A dial's deadline is the run's end, and its
						// timeout may fire before the context's: not a
						// refusal.
						count(name + " (cut by the end of the run)")
						<-actx.Done()
					case actx.Err() == nil:
						count(name + " (failed: " + firstWords(err.Error()) + ")")
						time.Sleep(200 * time.Millisecond)
					}
				}
			}()
		}
	}
	// Stalled frames.
	frame := bytes.Repeat([]byte("x"), 1<<20)
	attack("stalled 63 MiB frame", 10, func(ctx context.Context) error {
		c, err := rawUpgrade(ctx, pp.addr, "/megane/builder-tools/ws?token="+token)
		if err != nil {
			return err
		}
		defer c.Close()
		hdr := []byte{0x81, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} // mask key 0
		binary.BigEndian.PutUint64(hdr[2:10], 63<<20)
		c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write(append(hdr, `{"type":"tools:servers","id":1,"pad":"`...)); err != nil {
			return nil // closed: the bound at work
		}
		for i := 0; i < 60; i++ {
			if _, err := c.Write(frame); err != nil {
				return nil
			}
		}
		select { // stall
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
		return nil
	})
	// A chatty tool to a page that reads.
	attack("chatty progress call", 2, func(ctx context.Context) error {
		p, err := connectPage(ctx, "chatty")
		if err != nil {
			return err
		}
		defer p.Close()
		r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": "x", "server": "chatty", "tool": "slow",
			"arguments": map[string]any{"steps": 3000, "intervalMs": 0}})
		if err != nil {
			if p.CloseError() != nil && ctx.Err() == nil {
				return brokenPromise{fmt.Sprintf("a page that reads was closed: %v", p.CloseError())}
			}
			return err
		}
		if r.OK == nil || !*r.OK {
			return fmt.Errorf("chatty call: %s", r)
		}
		return nil
	})
	// A page that never reads its 8 MiB results.
	attack("8 MiB results never read", 2, func(ctx context.Context) error {
		p, err := connectPage(ctx, "big")
		if err != nil {
			return err
		}
		defer p.Drop()
		for i := range 8 {
			p.Send(map[string]any{"type": "tools:call", "id": i, "server": "big", "tool": "big", "arguments": map[string]any{"bytes": 8 << 20}})
		}
		select {
		case <-p.Done(): // closed 4408 (it reads nothing; its reader only buffers)
		case <-ctx.Done():
		case <-time.After(20 * time.Second):
		}
		return nil
	})
	// A server that escapes its keeper.
	attack("server kills its keeper", 1, func(ctx context.Context) error {
		p, _, err := bridgetest.Dial(ctx, wsURL, nil)
		if err != nil {
			return err
		}
		defer p.Close()
		_, err = p.Request(ctx, map[string]any{"type": "tools:connect", "id": "c", "server": "escape",
			"fingerprint": fingerprints["escape"], "confirmed": true})
		time.Sleep(time.Second)
		return err
	})
	// Results too deep to parse, and results that are not UTF-8.
	attack("deep or not-UTF-8 result", 1, func(ctx context.Context) error {
		p, err := connectPage(ctx, "big")
		if err != nil {
			return err
		}
		defer p.Close()
		q, err := connectPage(ctx, "latin")
		if err != nil {
			return err
		}
		defer q.Close()
		for i := 0; i < 5 && ctx.Err() == nil; i++ {
			r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": i, "server": "big", "tool": "big", "arguments": map[string]any{"bytes": 1024, "depth": 100000}})
			if err != nil {
				return err
			}
			if r.OK != nil && *r.OK {
				return brokenPromise{"a result too deep to parse was relayed"}
			}
			r, err = q.Request(ctx, map[string]any{"type": "tools:call", "id": i, "server": "latin", "tool": "badresult"})
			if err != nil {
				return err
			}
			if r.OK != nil && *r.OK {
				return brokenPromise{"a result that is not UTF-8 was relayed"}
			}
		}
		return nil
	})
	// Idle connections and unfinished chunk sequences.
	attack("idle connection", 300, func(ctx context.Context) error {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", pp.addr)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(time.Until(end)))
		_, _ = c.Read(make([]byte, 1)) // until the bridge closes it or the run ends
		return nil
	})
	attack("unfinished chunk sequence", 2, func(ctx context.Context) error {
		p, _, err := bridgetest.Dial(ctx, wsURL, nil)
		if err != nil {
			return err
		}
		defer p.Close()
		for i := range 4 {
			p.Send(map[string]any{"type": "tools:chunk", "id": "seq-" + strconv.Itoa(i), "seq": 0, "count": 16,
				"size": 15 << 20, "data": strings.Repeat("y", 1<<20)})
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		return nil
	})
	// A Streamable HTTP server that answers with an event of endless
	// 1 MiB id: and comment lines: the call fails at the bound.
	attack("HTTP event of endless fields", 1, func(ctx context.Context) error {
		p, err := connectPage(ctx, "hostile-http")
		if err != nil {
			return err
		}
		defer p.Close()
		r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": "f", "server": "hostile-http", "tool": "echo", "arguments": map[string]any{"attack": "fields"}})
		if err != nil {
			return err
		}
		if r.OK != nil && *r.OK {
			return brokenPromise{"an event of endless fields was answered ok"}
		}
		return nil
	})
	// Large results at once over HTTP, to a page that reads: six of
	// 255 MiB with their length, or four of 255 MiB gzip-compressed (255
	// KiB on the wire). Each is answered, with its result or busy or
	// too-large, and the bridge stays under its ceiling.
	for _, a := range []struct {
		kind string
		n    int
	}{{"json", 6}, {"gzip", 4}} {
		attack(fmt.Sprintf("HTTP %d × 255 MiB %s results at once", a.n, a.kind), 1, func(ctx context.Context) error {
			p, err := connectPage(ctx, "hostile-http")
			if err != nil {
				return err
			}
			defer p.Close()
			for i := range a.n {
				p.Send(map[string]any{"type": "tools:call", "id": i, "server": "hostile-http", "tool": "echo", "arguments": map[string]any{"attack": a.kind}})
			}
			for i := range a.n {
				r, err := p.Reply(ctx, "tools:call", i)
				if err != nil {
					return err
				}
				if r.OK == nil || !*r.OK {
					if r.Error == nil || (r.Error.Code != "busy" && r.Error.Code != "too-large") {
						return brokenPromise{fmt.Sprintf("a large HTTP result was answered %s", r)}
					}
				}
			}
			return nil
		})
	}
	for ctx.Err() == nil && time.Now().Before(end) {
		sample()
		time.Sleep(250 * time.Millisecond)
	}
	schedEnd := schedHistogram(ctx, metricsURL)
	bridgeCPU, machineBusy := cpuFrom.share(readCPUUse(bridgePid))
	acancel()
	wg.Wait()

	// The machine's floor: every core busy computing, the bridge idle.
	time.Sleep(time.Until(floorFrom))
	fctx, fcancel := context.WithDeadline(ctx, floorEnd)
	var computing []*exec.Cmd
	for range runtime.NumCPU() {
		cmd := exec.CommandContext(fctx, "sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Errorf("a computing process: %v", err)
			continue
		}
		computing = append(computing, cmd)
	}
	if now := time.Now(); now.After(floorFrom) {
		floorFrom = now // the attackers took longer than settle to leave
	}
	for _, cmd := range computing {
		cmd.Wait()
	}
	fcancel()
	<-legitDone
	hwm := procStatusKB(bridgePid, "VmHWM:") << 10
	peak := max(peakRSS.Load(), hwm)

	// The escaping server's processes are gone once the bridge stops.
	pp.cmd.Process.Signal(os.Interrupt)
	select {
	case <-pp.exited:
	case <-time.After(40 * time.Second):
		t.Errorf("the bridge did not stop within 40 s of SIGINT")
	}
	time.Sleep(500 * time.Millisecond)
	left := markedProcs(marker)

	// A call's phase, by when it was sent: quiet, under attack, on the
	// floor, or none (the attackers leaving; such a call must still be
	// answered).
	const (
		quietPhase = iota
		attackPhase
		floorPhase
		settlePhase
	)
	phase := func(ns int64) int {
		switch at := time.Unix(0, ns); {
		case at.Before(attackFrom):
			return quietPhase
		case at.Before(end):
			return attackPhase
		case !at.Before(floorFrom) && at.Before(floorEnd):
			return floorPhase
		}
		return settlePhase
	}
	var lat [4][]time.Duration // the page's, by phase
	var failed []string
	for _, o := range outcomes {
		if o.Err != "" {
			failed = append(failed, fmt.Sprintf("%s: %s", time.Unix(0, o.At).Sub(start).Round(time.Second), o.Err))
			continue
		}
		p := phase(o.At)
		lat[p] = append(lat[p], time.Duration(o.Latency))
	}
	// The same calls as the bridge timed them, from their arrival to their
	// answer (its audit lines): what is left is outside the bridge.
	var inBridge [4][]time.Duration // the bridge's, by phase
	for _, m := range auditCallRE.FindAllStringSubmatch(pp.stderr.String(), -1) {
		ms, err1 := strconv.ParseFloat(m[1], 64)
		n, err2 := strconv.Atoi(m[2])
		if err1 != nil || err2 != nil || n >= len(outcomes) || outcomes[n].Err != "" {
			continue
		}
		p := phase(outcomes[n].At)
		inBridge[p] = append(inBridge[p], time.Duration(ms*float64(time.Millisecond)))
	}
	var attacks []string
	counts.Range(func(k, v any) bool {
		attacks = append(attacks, fmt.Sprintf("%s ×%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	slices.Sort(attacks)
	t.Logf("attacks run: %s", strings.Join(attacks, "; "))
	// Where the legitimate call's delay is spent: in the bridge, and of
	// that, waiting for a processor (its Go scheduler; every goroutine's
	// waits, not only the legitimate call's).
	// The floor is what the machine gives the call when all its cores
	// are busy and the bridge is not: the part of the delay under attack
	// that no bridge could remove.
	t.Logf("abuse: every attack at once for %s against one bridge (memory_limit %d MiB), a legitimate echo call every %s | peak RSS under the ceiling, no legitimate call lost, no escaped process left | peak RSS %d MiB; %d of %d legitimate calls answered; p50/p99 %s/%s quiet, %s/%s under attack, %s/%s on the machine's floor (%d processes computing, the bridge idle) (in the bridge, arrival to answer: %s/%s quiet, %s/%s under attack, %s/%s on the floor; its goroutines' wait for a processor, p99: ≤ %s quiet, ≤ %s under attack; under attack the bridge took %.2f cores and the machine was %.0f%% busy); %d processes left",
		dur, ceiling>>20, every, peak>>20, len(outcomes)-len(failed), len(outcomes),
		pct(lat[quietPhase], 50), pct(lat[quietPhase], 99), pct(lat[attackPhase], 50), pct(lat[attackPhase], 99),
		pct(lat[floorPhase], 50), pct(lat[floorPhase], 99), len(computing),
		pct(inBridge[quietPhase], 50), pct(inBridge[quietPhase], 99), pct(inBridge[attackPhase], 50), pct(inBridge[attackPhase], 99),
		pct(inBridge[floorPhase], 50), pct(inBridge[floorPhase], 99),
		schedQuiet.minus(schedStart).quantile(0.99), schedEnd.minus(schedQuiet).quantile(0.99), bridgeCPU, 100*machineBusy, len(left))
	if peak >= ceiling && !raceEnabled { // the race detector multiplies memory: the bound is for a real build (make abuse)
		t.Errorf("the bridge's RSS reached %d MiB, over its %d MiB ceiling", peak>>20, ceiling>>20)
	}
	if len(failed) > 0 || len(outcomes) == 0 {
		t.Errorf("%d of %d legitimate calls failed: %s", len(failed), len(outcomes), strings.Join(failed, "; "))
	}
	if len(left) > 0 {
		t.Errorf("processes of the tool servers left after the bridge stopped: %v", left)
	}
	violations.Range(func(k, _ any) bool {
		t.Errorf("broken promise: %s", k)
		return true
	})
	if t.Failed() {
		t.Logf("bridge log (tail):\n%s", tail(pp.stderr.String(), 4000))
	}
}

// auditCallRE finds the bridge's audit line of each legitimate call: its
// duration in ms and its number.
var auditCallRE = regexp.MustCompile(`msg=audit event=call .*?duration_ms=([0-9.e+-]+) .*?id="\\"legit-([0-9]+)\\""`)

// histogram is a Prometheus histogram as scraped: cumulative counts by
// upper bound, in increasing order of bound.
type histogram struct {
	le    []float64
	count []float64
}

// schedHistogram scrapes go_sched_latencies_seconds from the bridge's
// metrics, parsed by the client library's own text parser; an empty
// histogram if it cannot.
func schedHistogram(ctx context.Context, url string) histogram {
	var h histogram
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return h
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return h
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	f := fams["go_sched_latencies_seconds"]
	if err != nil || f == nil || len(f.GetMetric()) == 0 {
		return h
	}
	hist := f.GetMetric()[0].GetHistogram()
	for _, b := range hist.GetBucket() {
		h.le, h.count = append(h.le, b.GetUpperBound()), append(h.count, float64(b.GetCumulativeCount()))
	}
	if len(h.le) == 0 || !math.IsInf(h.le[len(h.le)-1], 1) {
		h.le, h.count = append(h.le, math.Inf(1)), append(h.count, float64(hist.GetSampleCount()))
	}
	return h
}

// minus is h's counts less those of an earlier scrape with the same bounds.
func (h histogram) minus(earlier histogram) histogram {
	if len(earlier.count) != len(h.count) {
		return h
	}
	d := histogram{le: h.le, count: make([]float64, len(h.count))}
	for i := range h.count {
		d.count[i] = h.count[i] - earlier.count[i]
	}
	return d
}

// quantile is the upper bound of the bucket holding quantile q, or "?"
// when there are no samples.
func (h histogram) quantile(q float64) string {
	if len(h.count) == 0 || h.count[len(h.count)-1] == 0 {
		return "?"
	}
	total := h.count[len(h.count)-1]
	for i, c := range h.count {
		if c >= q*total {
			if math.IsInf(h.le[i], 1) {
				return fmt.Sprintf("+Inf (over %s)", time.Duration(h.le[max(i-1, 0)]*float64(time.Second)))
			}
			return time.Duration(h.le[i] * float64(time.Second)).String()
		}
	}
	return "?"
}

// brokenPromise is an attack's finding that the bridge broke a promise
// (rather than the attack failing, which is the bound at work).
type brokenPromise struct{ what string }

func (b brokenPromise) Error() string { return b.what }

// rawUpgrade opens a WebSocket to addr at path by hand and returns the
// connection once the bridge answered 101, so that frames can be written
// as they are (one frame header, then its payload in pieces).
func rawUpgrade(ctx context.Context, addr, path string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", path, addr)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.SetReadDeadline(time.Time{})
	if resp.StatusCode != http.StatusSwitchingProtocols {
		c.Close()
		return nil, fmt.Errorf("upgrade answered %s", resp.Status)
	}
	return c, nil
}

// procStatusKB is a "Name: N kB" field of /proc/<pid>/status, in KiB.
func procStatusKB(pid int, field string) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

// cpuUse is a process's CPU time (child.Lookup), the machine's busy and
// total time in clock ticks (/proc/stat), and when they were read, to tell
// the share of the machine the bridge and everything else took over a span.
type cpuUse struct {
	at          time.Time
	proc        time.Duration
	busy, total int64
}

func readCPUUse(pid int) cpuUse {
	u := cpuUse{at: time.Now()}
	if info, ok := child.Lookup(pid); ok {
		u.proc = info.CPU
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		for i, f := range strings.Fields(line)[1:] {
			n, _ := strconv.ParseInt(f, 10, 64)
			u.total += n
			if i != 3 && i != 4 { // idle, iowait
				u.busy += n
			}
		}
	}
	return u
}

// share is the process's and the machine's CPU from u to v: the process's
// in cores, the machine's busy fraction.
func (u cpuUse) share(v cpuUse) (cores, busy float64) {
	if wall := v.at.Sub(u.at); wall > 0 {
		cores = float64(v.proc-u.proc) / float64(wall)
	}
	if total := float64(v.total - u.total); total > 0 {
		busy = float64(v.busy-u.busy) / total
	}
	return cores, busy
}

// pct is the p-th percentile of ds (nearest rank), rounded for a log.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))].Round(100 * time.Microsecond)
}

// firstWords is the start of an error message, for counting kinds.
func firstWords(s string) string {
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
