package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// loadSpec is the size of a load run.
type loadSpec struct {
	tabs, calls int // tabs, and calls per tab
	window      int // calls in flight per tab
	steps       int // progress notifications per call
	servers     int // each tab connects this many servers; call k goes to server k % servers
}

// loadResult is what a load run measured.
type loadResult struct {
	calls, progress int
	elapsed         time.Duration
	heapBase        uint64 // HeapAlloc after GC before the run
	heapPeak        uint64 // the largest HeapAlloc sampled during it
	problems        []string
}

func (r loadResult) callsPerSecond() float64 { return float64(r.calls) / r.elapsed.Seconds() }

// loadCall is what a tab saw of one call.
type loadCall struct {
	tag      string
	progress int // notifications received, each checked in order
	replies  int
	lastStep int // the step of the latest progress received
}

// loadTab is a page that keeps nothing but what it checks: each call's
// progress (count, order, tag) and its single reply (tag).
type loadTab struct {
	n     int
	conn  *websocket.Conn
	wmu   sync.Mutex
	steps int

	mu       sync.Mutex
	calls    map[string]*loadCall // guarded by mu; by the call's id text
	replies  chan string          // ids of call replies, for the window
	connects chan []byte          // raw connect replies
	problems []string             // guarded by mu
	progress int                  // guarded by mu
}

func (lt *loadTab) problem(format string, args ...any) {
	lt.mu.Lock()
	if len(lt.problems) < 20 {
		lt.problems = append(lt.problems, fmt.Sprintf("tab %d: ", lt.n)+fmt.Sprintf(format, args...))
	}
	lt.mu.Unlock()
}

func (lt *loadTab) send(v any) error {
	b, _ := json.Marshal(v)
	lt.wmu.Lock()
	defer lt.wmu.Unlock()
	return lt.conn.WriteMessage(websocket.TextMessage, b)
}

// readLoop checks every message as it arrives.
func (lt *loadTab) readLoop() {
	defer close(lt.replies)
	for {
		_, data, err := lt.conn.ReadMessage()
		if err != nil {
			return
		}
		var m struct {
			Type     string          `json:"type"`
			ID       json.RawMessage `json:"id"`
			OK       *bool           `json:"ok"`
			Progress float64         `json:"progress"`
			Message  string          `json:"message"`
			Error    *struct{ Code, Message string }
			Result   *struct {
				StructuredContent struct {
					Tag   string `json:"tag"`
					Steps int    `json:"steps"`
				} `json:"structuredContent"`
			} `json:"result"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			lt.problem("a message that is not JSON: %.200s", data)
			continue
		}
		switch m.Type {
		case "tools:connect":
			lt.connects <- data
			continue
		case "tools:progress", "tools:call":
		default:
			lt.problem("unexpected message %.200s", data)
			continue
		}
		id := string(m.ID)
		lt.mu.Lock()
		c := lt.calls[id]
		lt.mu.Unlock()
		if c == nil {
			lt.problem("a message for a call this tab never made: %.200s", data)
			continue
		}
		if m.Type == "tools:progress" {
			// A call's progress still queued is replaced by the next
			// (issue 28): steps may be skipped, never reordered.
			step := int(m.Progress)
			switch {
			case c.replies > 0:
				lt.problem("progress after the result of %s: %s", c.tag, m.Message)
			case m.Progress != float64(step) || step <= c.lastStep || step > lt.steps || m.Message != fmt.Sprintf("%s step %d", c.tag, step):
				lt.problem("call %s: progress %v %q after step %d", c.tag, m.Progress, m.Message, c.lastStep)
			}
			c.lastStep = step
			c.progress++
			lt.mu.Lock()
			lt.progress++
			lt.mu.Unlock()
			continue
		}
		c.replies++
		switch {
		case c.replies > 1:
			lt.problem("a second reply for %s: %.200s", c.tag, data)
		case m.OK == nil || !*m.OK || m.Result == nil:
			lt.problem("call %s failed: %.300s", c.tag, data)
		case m.Result.StructuredContent.Tag != c.tag:
			lt.problem("call %s got the result of %s", c.tag, m.Result.StructuredContent.Tag)
		case c.lastStep != lt.steps:
			lt.problem("call %s: its last progress before the result was step %d, want %d", c.tag, c.lastStep, lt.steps)
		}
		lt.replies <- id
	}
}

// runLoad connects spec.tabs tabs to servers and makes every call, checking
// each result and each progress notification, and samples the heap of this
// process (the bridge and the pages) while it runs.
func runLoad(t testing.TB, ctx context.Context, wsURL string, servers []bridge.ServerSpec, ls loadSpec) loadResult {
	var res loadResult
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.heapBase, res.heapPeak = ms.HeapAlloc, ms.HeapAlloc
	stop := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		p := res.heapBase
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				peak <- p
				return
			case <-tick.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				p = max(p, ms.HeapAlloc)
			}
		}
	}()

	tabs := make([]*loadTab, ls.tabs)
	var readers sync.WaitGroup
	for i := range tabs {
		conn, _, err := websocket.DefaultDialer.DialContext(ctx, wsURL, nil)
		if err != nil {
			t.Fatalf("dial tab %d: %v", i, err)
		}
		lt := &loadTab{n: i, conn: conn, steps: ls.steps, calls: map[string]*loadCall{},
			replies: make(chan string, ls.calls), connects: make(chan []byte, len(servers))}
		tabs[i] = lt
		readers.Add(1)
		go func() { defer readers.Done(); lt.readLoop() }()
		for k, spec := range servers[:ls.servers] {
			lt.send(map[string]any{"type": "tools:connect", "id": "connect-" + strconv.Itoa(k), "server": spec.Name,
				"fingerprint": spec.Fingerprint, "confirmed": true})
		}
		for range ls.servers {
			select {
			case r := <-lt.connects:
				if !strings.Contains(string(r), `"ok":true`) {
					t.Fatalf("tab %d connect: %.300s", i, r)
				}
			case <-ctx.Done():
				t.Fatalf("tab %d connect: %v", i, ctx.Err())
			}
		}
	}
	start := time.Now()
	var tabsWG sync.WaitGroup
	for _, lt := range tabs {
		tabsWG.Add(1)
		go func() {
			defer tabsWG.Done()
			inFlight := 0
			for k := 0; k < ls.calls; k++ {
				if inFlight == ls.window {
					select {
					case <-lt.replies:
						inFlight--
					case <-ctx.Done():
						lt.problem("stuck with %d calls in flight: %v", inFlight, ctx.Err())
						return
					}
				}
				id := strconv.Itoa(k)
				tag := fmt.Sprintf("tab%d-call%d", lt.n, k)
				lt.mu.Lock()
				lt.calls[id] = &loadCall{tag: tag}
				lt.mu.Unlock()
				server := servers[k%ls.servers].Name
				if err := lt.send(map[string]any{"type": "tools:call", "id": k, "server": server, "tool": "slow",
					"arguments": map[string]any{"steps": ls.steps, "intervalMs": 0, "tag": tag}}); err != nil {
					lt.problem("send: %v", err)
					return
				}
				inFlight++
			}
			for ; inFlight > 0; inFlight-- {
				select {
				case <-lt.replies:
				case <-ctx.Done():
					lt.problem("%d calls never answered: %v", inFlight, ctx.Err())
					return
				}
			}
		}()
	}
	tabsWG.Wait()
	res.elapsed = time.Since(start)
	close(stop)
	res.heapPeak = <-peak
	for _, lt := range tabs {
		lt.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		lt.conn.Close()
	}
	readers.Wait()
	for _, lt := range tabs {
		res.problems = append(res.problems, lt.problems...)
		res.progress += lt.progress
		for _, c := range lt.calls {
			if c.replies == 1 {
				res.calls++
			} else if c.replies == 0 {
				res.problems = append(res.problems, "no reply for "+c.tag)
			}
		}
	}
	return res
}

// loadServers returns n bridgetest servers named load-0, load-1, ...
func loadServers(t testing.TB, n int) []bridge.ServerSpec {
	specs := make([]bridge.ServerSpec, n)
	for i := range specs {
		specs[i] = fakeServer(t, "load-"+strconv.Itoa(i), bridgetest.Mode{})
	}
	return specs
}

// loadOptions lets every call of a load run be in flight at once.
func loadOptions() bridge.Options {
	return bridge.Options{MaxCallsPerTab: 64, MaxCallsPerServer: 1 << 14}
}

// TestLoad runs many tabs, each with several calls in flight streaming
// progress, over one session shared by every tab and over three servers at
// once, and checks every result and every progress notification: none
// duplicated, out of order or delivered to the wrong call or tab, and each
// call's last step delivered before its result (a step still queued when
// the next comes is replaced by it). It reports calls
// per second and the heap.
//
// It runs the size issue 5 names, 50 tabs × 200 calls (3 progress each),
// as BenchmarkLoad in bench_test.go does: about 15 s under -race on a
// 2-core machine. go test -short runs 10 tabs × 50 calls.
func TestLoad(t *testing.T) {
	size := loadSpec{tabs: 50, calls: 200, window: 4, steps: 3}
	if testing.Short() {
		size.tabs, size.calls = 10, 50
	}
	servers := loadServers(t, 3)
	for _, tc := range []struct {
		name    string
		servers int
	}{{"one shared session", 1}, {"three servers", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			ctx := testCtx(t, 5*time.Minute)
			h := newHarness(t, loadOptions(), servers...)
			ls := size
			ls.servers = tc.servers
			res := runLoad(t, ctx, h.wsURL, servers, ls)
			for _, p := range res.problems {
				t.Error(p)
			}
			if want := ls.tabs * ls.calls; res.calls != want || res.progress < want || res.progress > want*ls.steps {
				t.Errorf("%d calls answered once and %d progress notifications; want %d and %d to %d (superseded progress is replaced)", res.calls, res.progress, want, want, want*ls.steps)
			}
			t.Logf("%d tabs × %d calls (%d progress each) over %d server(s): %.0f calls/s; heap %d MiB before, peak %d MiB",
				ls.tabs, ls.calls, ls.steps, ls.servers, res.callsPerSecond(), res.heapBase>>20, res.heapPeak>>20)
			// Bounded: nothing grows with the number of calls made. The bound
			// is loose (it includes the pages of this process).
			if grown := int64(res.heapPeak) - int64(res.heapBase); grown > 256<<20 {
				t.Errorf("the heap grew by %d MiB during the run", grown>>20)
			}
		})
	}
}
