// Command benchharness measures the bridge against a direct MCP client and
// against supergateway, in one run, and prints one markdown table
// (`make bench` runs it). It is a development tool: it builds and starts the
// real megane-jupyter-bridge binary, serves the bridgetest tool server
// itself (it re-executes itself with BRIDGETEST_SERVER set), and talks only
// to loopback addresses.
//
// It never changes anything outside its temporary directory and never
// takes part in the bridge's own operation.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if bridgetest.ServeFromEnv() {
		os.Exit(0)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchharness:", err)
		os.Exit(1)
	}
}

type config struct {
	bridgeBin    string
	oldBridge    string // an earlier binary to compare rows 8 and 9 with; empty for none
	streamsOnly  bool   // rows 8 and 9 only
	supergateway string
	atoms        int
	runs         int
	smallCalls   int // sequential calls at 1 tab
	tabs         int // concurrent tabs
	tabCalls     int // calls per tab at tabs
	idle         int // idle sockets
	goBench      bool
	dir          string
	exe          string
}

func run() error {
	var c config
	flag.StringVar(&c.bridgeBin, "bridge", "", "the megane-jupyter-bridge binary (default: go build it)")
	flag.StringVar(&c.supergateway, "supergateway", ".ci/node/node_modules/supergateway/dist/index.js", "supergateway's entry point; empty skips it")
	flag.IntVar(&c.atoms, "atoms", 500000, "atoms in the large result")
	flag.IntVar(&c.runs, "runs", 3, "runs of each large-payload measurement (the median is shown)")
	flag.IntVar(&c.smallCalls, "small", 2000, "small calls at 1 tab")
	flag.IntVar(&c.tabs, "tabs", 50, "concurrent tabs for the small-call latency")
	flag.IntVar(&c.tabCalls, "tab-calls", 100, "small calls per tab at -tabs")
	flag.IntVar(&c.idle, "idle", 1000, "idle sockets")
	flag.BoolVar(&c.streamsOnly, "streams-only", false, "run rows 8 and 9 (streamed results) only")
	flag.StringVar(&c.oldBridge, "old-bridge", "", "an earlier megane-jupyter-bridge binary: rows 7 (behind the real proxy and the Hub, alternating), 8 and 9 compare with it too")
	flag.BoolVar(&c.goBench, "go-bench", true, "also run BenchmarkFloor and BenchmarkJupyterHop (rows 6 and 7; the hop rows need the Debian 13 chroot)")
	flag.Parse()
	var err error
	if c.exe, err = os.Executable(); err != nil {
		return err
	}
	if c.dir, err = os.MkdirTemp("", "benchharness-"); err != nil {
		return err
	}
	defer os.RemoveAll(c.dir)
	if c.bridgeBin == "" {
		c.bridgeBin = filepath.Join(c.dir, "megane-jupyter-bridge")
		build := exec.Command("go", "build", "-o", c.bridgeBin, "./cmd/megane-jupyter-bridge")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build the bridge (run from the repository root): %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var rows []row
	if c.streamsOnly {
		more, err := c.streamRows(ctx)
		if err != nil {
			return err
		}
		printRows(append(rows, more...))
		return nil
	}

	// 1, 4: the large result, on a fresh bridge (its VmHWM is this run's).
	direct, err := c.largeDirect(ctx)
	if err != nil {
		return fmt.Errorf("direct large call: %w", err)
	}
	br, err := c.startBridge(ctx)
	if err != nil {
		return err
	}
	bridged, size, err := c.largeBridged(ctx, br)
	if err != nil {
		br.stop()
		return fmt.Errorf("bridged large call: %w", err)
	}
	hwm := br.status("VmHWM")
	// The same with a page session (message numbers, acknowledgements, the
	// result held until acknowledged), right after, on the same bridge.
	sessioned, _, err := c.largeBridged(ctx, br, "resume")
	if err != nil {
		br.stop()
		return fmt.Errorf("bridged large call with a page session: %w", err)
	}
	// And with binary chunk frames (the client module asks for both).
	binaried, _, err := c.largeBridged(ctx, br, "binary")
	if err != nil {
		br.stop()
		return fmt.Errorf("bridged large call with binary chunk frames: %w", err)
	}
	rows = append(rows,
		row{"1. 500k-atom result, direct go-sdk client (stdio)", ms(direct), "", ""},
		row{"1. same through the bridge (WebSocket → bridge → stdio)", ms(bridged),
			fmt.Sprintf("%.2f × direct", bridged.Seconds()/direct.Seconds()), verdict(bridged.Seconds() <= 1.15*direct.Seconds(), "≤ 1.15 × direct")},
		row{"1. same with a page session (numbered, acknowledged)", ms(sessioned),
			fmt.Sprintf("%.2f × without", sessioned.Seconds()/bridged.Seconds()), "within noise"},
		row{"1. same with binary chunk frames (no escaping)", ms(binaried),
			fmt.Sprintf("%.2f × text chunks", binaried.Seconds()/bridged.Seconds()), ""},
	)
	if c.supergateway != "" {
		sg, err := c.largeSupergateway(ctx)
		if err != nil {
			rows = append(rows, row{"2. same through supergateway (WebSocket → node → stdio)", "failed: " + oneLine(err.Error()), "", ""})
		} else {
			rows = append(rows, row{"2. same through supergateway (WebSocket → node → stdio)", ms(sg),
				fmt.Sprintf("bridge is %.2f × faster", sg.Seconds()/bridged.Seconds()), verdict(bridged < sg, "bridge faster")})
		}
	}
	rows = append(rows, row{"4. bridge peak RSS (VmHWM) during 1", mib(hwm),
		fmt.Sprintf("%.2f × the %.1f MB payload", float64(hwm)/float64(size), float64(size)/1e6), verdict(float64(hwm) <= 2.5*float64(size), "≤ 2.5 × payload")})

	// 3: small calls.
	for _, tabs := range []int{1, c.tabs} {
		calls := c.smallCalls
		if tabs > 1 {
			calls = c.tabCalls
		}
		d, err := c.smallDirect(ctx, tabs, calls)
		if err != nil {
			br.stop()
			return fmt.Errorf("direct small calls: %w", err)
		}
		b, err := c.smallBridged(ctx, br, tabs, calls, false)
		if err != nil {
			br.stop()
			return fmt.Errorf("bridged small calls: %w", err)
		}
		bs, err := c.smallBridged(ctx, br, tabs, calls, true)
		if err != nil {
			br.stop()
			return fmt.Errorf("bridged small calls with a page session: %w", err)
		}
		add50, add99 := pct(b, 50)-pct(d, 50), pct(b, 99)-pct(d, 99)
		rows = append(rows, row{fmt.Sprintf("3. small call latency, %d tab(s) × %d calls: direct p50 / p99", tabs, calls),
			fmt.Sprintf("%s / %s", us(pct(d, 50)), us(pct(d, 99))), "", ""})
		rows = append(rows, row{"3. same through the bridge: p50 / p99 (added)",
			fmt.Sprintf("%s / %s", us(pct(b, 50)), us(pct(b, 99))),
			fmt.Sprintf("%s / %s", signedUS(add50), signedUS(add99)), verdict(add50 <= 300*time.Microsecond, "p50 ≤ +0.3 ms")})
		rows = append(rows, row{"3. same with a page session (numbered, each reply acknowledged): p50 / p99",
			fmt.Sprintf("%s / %s", us(pct(bs, 50)), us(pct(bs, 99))),
			fmt.Sprintf("%s / %s vs without", signedUS(pct(bs, 50)-pct(b, 50)), signedUS(pct(bs, 99)-pct(b, 99))), "within noise"})
	}
	br.stop()

	// 5: idle sockets, on a fresh bridge.
	br, err = c.startBridge(ctx)
	if err != nil {
		return err
	}
	perTab, err := c.idleSockets(ctx, br)
	br.stop()
	if err != nil {
		return fmt.Errorf("idle sockets: %w", err)
	}
	rows = append(rows, row{fmt.Sprintf("5. bridge memory per idle tab (%d sockets, RSS)", c.idle),
		fmt.Sprintf("%.1f KiB", perTab/1024), "", verdict(perTab <= 64*1024, "≤ 64 KiB")})

	// 8, 9: streamed results.
	more, err := c.streamRows(ctx)
	if err != nil {
		return err
	}
	rows = append(rows, more...)

	if c.goBench {
		more, err := c.floorAndHop(ctx)
		if err != nil {
			return err
		}
		rows = append(rows, more...)
	}

	printRows(rows)
	return nil
}

// printRows prints the table.
func printRows(rows []row) {
	fmt.Printf("megane-jupyter-bridge benchmarks (%s, %s/%s, %d CPUs, %s)\n\n", time.Now().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel())
	fmt.Println("| measurement | result | comparison | target |")
	fmt.Println("|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s | %s |\n", r.what, r.value, r.compare, r.target)
	}
}

type row struct{ what, value, compare, target string }

func verdict(ok bool, target string) string {
	if ok {
		return target + ": met"
	}
	return target + ": **missed**"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/1e6) }
func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/1e3) }

// signedUS is an added latency: "+125 µs", or "−136 µs" when the bridge was
// faster.
func signedUS(d time.Duration) string {
	if d < 0 {
		return "−" + us(-d)
	}
	return "+" + us(d)
}
func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// median sorts v and returns its middle value.
func median[T cmp.Ordered](v []T) T {
	slices.Sort(v)
	return v[len(v)/2]
}

func pct(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

// toolServerEnv is the environment entry that makes this binary the tool
// server.
func toolServerEnv() string { return bridgetest.Mode{Name: "bench"}.Env() }

func (c *config) atomsArgs(tag string) map[string]any {
	return map[string]any{"n": c.atoms, "seed": 1, "tag": tag}
}

// ---- direct go-sdk client ----

// directSession starts the tool server and connects a go-sdk client to it
// over stdio, with no line length cap (go-sdk's CommandTransport caps a
// message at 16 MiB).
func (c *config) directSession(ctx context.Context) (*mcp.ClientSession, func(), error) {
	cmd := exec.Command(c.exe)
	cmd.Env = append(os.Environ(), toolServerEnv())
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "benchharness", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: stdin, MaxLineLength: -1}, nil)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, nil, err
	}
	return cs, func() { cs.Close(); cmd.Wait() }, nil
}

func (c *config) largeDirect(ctx context.Context) (time.Duration, error) {
	cs, done, err := c.directSession(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	var ds []time.Duration
	for i := 0; i < c.runs; i++ {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "atoms", Arguments: c.atomsArgs("direct")})
		if err != nil {
			return 0, err
		}
		if res.IsError || res.StructuredContent == nil {
			return 0, errors.New("atoms failed")
		}
		ds = append(ds, time.Since(start))
	}
	return median(ds), nil
}

func (c *config) smallDirect(ctx context.Context, tabs, calls int) ([]time.Duration, error) {
	cs, done, err := c.directSession(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	// Warm up.
	for i := 0; i < 50; i++ {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"i": i}}); err != nil {
			return nil, err
		}
	}
	return concurrently(tabs, calls, func(tab, i int) error {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"tab": tab, "i": i}})
		return err
	})
}

// concurrently runs f(tab, i) for calls calls on each of tabs goroutines and
// returns every call's duration.
func concurrently(tabs, calls int, f func(tab, i int) error) ([]time.Duration, error) {
	var mu sync.Mutex
	var all []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	for tab := 0; tab < tabs; tab++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds := make([]time.Duration, 0, calls)
			for i := 0; i < calls; i++ {
				start := time.Now()
				if err := f(tab, i); err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					return
				}
				ds = append(ds, time.Since(start))
			}
			mu.Lock()
			all = append(all, ds...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all, firstErr
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// ---- the bridge, as its own process ----

type bridgeProc struct {
	cmd         *exec.Cmd
	addr, token string
	fingerprint string
	done        chan struct{}
}

func (c *config) startBridge(ctx context.Context) (*bridgeProc, error) {
	return c.startBridgeWith(ctx, c.bridgeBin, "")
}

// startBridgeWith starts bin with admin as its megane_jupyter_bridge.toml
// (none if empty).
func (c *config) startBridgeWith(ctx context.Context, bin, admin string) (*bridgeProc, error) {
	dir, err := os.MkdirTemp(c.dir, "bridge-")
	if err != nil {
		return nil, err
	}
	configPath := ""
	if admin != "" {
		configPath = filepath.Join(dir, "admin")
		if err := os.MkdirAll(configPath, 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(configPath, "megane_jupyter_bridge.toml"), []byte(admin), 0o600); err != nil {
			return nil, err
		}
	}
	mode := strings.TrimPrefix(toolServerEnv(), bridgetest.EnvVar+"=")
	servers, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"bench": map[string]any{"command": c.exe, "env": map[string]string{bridgetest.EnvVar: mode}}}})
	file := filepath.Join(dir, "servers.json")
	ready := filepath.Join(dir, "ready")
	if err := os.WriteFile(file, servers, 0o600); err != nil {
		return nil, err
	}
	b := &bridgeProc{token: "bench-token-0123456789", done: make(chan struct{})}
	b.cmd = exec.Command(bin, "serve", "--standalone", "--port", "0", "--token", b.token,
		"--servers", file, "--ready-file", ready, "--log-level", "warn")
	b.cmd.Env = append(os.Environ(), "HOME="+filepath.Join(dir, "home"), "JUPYTER_CONFIG_DIR="+filepath.Join(dir, "cfg"),
		"JUPYTER_DATA_DIR="+filepath.Join(dir, "data"), "JUPYTER_RUNTIME_DIR="+filepath.Join(dir, "rt"), "JUPYTER_CONFIG_PATH="+configPath)
	b.cmd.Stderr = os.Stderr
	child.InGroup(b.cmd)
	if err := b.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { b.cmd.Wait(); close(b.done) }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if data, err := os.ReadFile(ready); err == nil && len(data) > 0 {
			b.addr = strings.TrimSpace(string(data))
			break
		}
		select {
		case <-b.done:
			return nil, errors.New("the bridge exited at start")
		default:
		}
		if time.Now().After(deadline) {
			b.stop()
			return nil, errors.New("the bridge did not get ready")
		}
	}
	p, err := b.dial(ctx)
	if err != nil {
		b.stop()
		return nil, err
	}
	defer p.close()
	r, err := p.request(map[string]any{"type": "tools:servers", "id": 1})
	if err != nil {
		b.stop()
		return nil, err
	}
	var reply struct {
		Servers []struct{ Fingerprint string }
	}
	json.Unmarshal(r, &reply)
	if len(reply.Servers) != 1 {
		b.stop()
		return nil, fmt.Errorf("tools:servers: %.300s", r)
	}
	b.fingerprint = reply.Servers[0].Fingerprint
	return b, nil
}

func (b *bridgeProc) stop() {
	child.Interrupt(b.cmd.Process)
	select {
	case <-b.done:
	case <-time.After(15 * time.Second):
		child.KillGroup(b.cmd.Process)
		<-b.done
	}
}

// status reads a "VmXXX: N kB" field of the bridge's /proc status, in bytes.
func (b *bridgeProc) status(field string) int64 {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.cmd.Process.Pid))
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}

// page is a minimal synchronous page: one request at a time, chunks
// reassembled.
type page struct {
	conn    *websocket.Conn
	next    int
	session bool   // a page session (tools:hello with resume): acknowledges each reply
	lastN   uint64 // the number of the last page-session message read

	firstFrame time.Time // when the last streamed result's first binary frame came
}

func (b *bridgeProc) dial(ctx context.Context) (*page, error) {
	d := websocket.Dialer{ReadBufferSize: 64 << 10, WriteBufferSize: 16 << 10}
	conn, _, err := d.DialContext(ctx, "ws://"+b.addr+"/megane/builder-tools/ws?token="+b.token, nil)
	if err != nil {
		return nil, err
	}
	conn.SetReadLimit(-1)
	return &page{conn: conn}, nil
}

// dialSession opens a page with a page session, as builder-tools-client.js
// does: every message then carries its number, and the page acknowledges
// (here after every reply, more often than the client module's 50 ms).
func (b *bridgeProc) dialSession(ctx context.Context) (*page, error) {
	return b.dialFeatures(ctx, "resume")
}

// dialFeatures opens a page that asks for features in tools:hello.
func (b *bridgeProc) dialFeatures(ctx context.Context, features ...string) (*page, error) {
	p, err := b.dial(ctx)
	if err != nil {
		return nil, err
	}
	r, err := p.request(map[string]any{"type": "tools:hello", "features": features})
	if err != nil || !strings.Contains(string(r), `"features":["`+strings.Join(features, `","`)+`"]`) {
		p.close()
		return nil, fmt.Errorf("hello: features %q not granted: %v %.200s", features, err, r)
	}
	p.session = slices.Contains(features, "resume")
	return p, nil
}

func (p *page) close() {
	p.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	p.conn.Close()
}

// request sends v and returns the text of the reply with the same id (a
// progress message is skipped), reassembling chunks as a page does.
func (p *page) request(v map[string]any) ([]byte, error) {
	p.next++
	v["id"] = p.next
	want := strconv.Itoa(p.next)
	b, _ := json.Marshal(v)
	if err := p.conn.WriteMessage(websocket.TextMessage, b); err != nil {
		return nil, err
	}
	var whole []byte
	binLeft := 0        // binary frames still to come of the binary chunk sequence announced
	streaming := false  // a streamed result's frames are coming (feature "stream")
	var pieces [][]byte // its frames
	for {
		typ, frame, err := p.conn.ReadMessage()
		if err != nil {
			return nil, err
		}
		if typ == websocket.BinaryMessage && streaming {
			if len(pieces) == 0 {
				p.firstFrame = time.Now()
			}
			if p.session {
				frame = frame[8:] // its number
			}
			// Kept as they come and joined once: a page that copied a
			// growing buffer would stall the stream for its copies.
			pieces = append(pieces, frame)
			continue
		}
		if typ == websocket.TextMessage && bytes.HasPrefix(frame, []byte(`{"type":"tools:chunk"`)) && bytes.Contains(frame, []byte(`"stream":true`)) ||
			bytes.Contains(frame[:min(len(frame), 60)], []byte(`"type":"tools:chunk"`)) && bytes.Contains(frame, []byte(`"stream":true`)) {
			streaming, pieces = true, nil
			continue
		}
		if typ == websocket.TextMessage && streaming && bytes.Contains(frame, []byte(`"end":true`)) {
			streaming = false
			if !bytes.Contains(frame, []byte(`"ok":true`)) {
				pieces = nil
				continue // the call's error follows
			}
			frame, pieces = bytes.Join(pieces, nil), nil
		} else if typ == websocket.BinaryMessage {
			whole = append(whole, frame...)
			if binLeft--; binLeft > 0 {
				continue
			}
			frame, whole = whole, nil
		} else if bytes.HasPrefix(frame, []byte(`{"type":"tools:chunk"`)) && bytes.HasSuffix(frame, []byte(`"binary":true}`)) {
			var h struct{ Count, Size int }
			if err := json.Unmarshal(frame, &h); err != nil {
				return nil, err
			}
			binLeft, whole = h.Count, make([]byte, 0, h.Size)
			continue
		}
		var head struct {
			Type  string          `json:"type"`
			ID    json.RawMessage `json:"id"`
			OK    *bool           `json:"ok"`
			Seq   int             `json:"seq"`
			Count int             `json:"count"`
			Data  *string         `json:"data"`
			N     uint64          `json:"n"`
		}
		if len(frame) > 1<<16 || strings.Contains(string(frame[:min(len(frame), 40)]), `"tools:chunk"`) {
			if err := json.Unmarshal(frame, &head); err != nil {
				return nil, err
			}
		} else if err := json.Unmarshal(frame, &head); err != nil {
			return nil, err
		}
		if head.Type == "tools:chunk" && head.Data != nil {
			whole = append(whole, *head.Data...)
			if head.Seq+1 < head.Count {
				continue
			}
			frame, whole = whole, nil
			head.OK = nil
			var inner struct {
				ID json.RawMessage `json:"id"`
				OK *bool           `json:"ok"`
				N  uint64          `json:"n"`
			}
			if err := json.Unmarshal(frame, &inner); err != nil {
				return nil, err
			}
			head.ID, head.OK, head.N = inner.ID, inner.OK, inner.N
		}
		p.lastN = max(p.lastN, head.N)
		if head.OK != nil && string(head.ID) == want {
			if !*head.OK {
				return nil, fmt.Errorf("%.300s", frame)
			}
			if p.session {
				ack, _ := json.Marshal(map[string]any{"type": "tools:ack", "n": p.lastN})
				if err := p.conn.WriteMessage(websocket.TextMessage, ack); err != nil {
					return nil, err
				}
			}
			return frame, nil
		}
	}
}

func (p *page) connect(b *bridgeProc) error {
	_, err := p.request(map[string]any{"type": "tools:connect", "server": "bench", "fingerprint": b.fingerprint, "confirmed": true})
	return err
}

func (c *config) largeBridged(ctx context.Context, b *bridgeProc, features ...string) (time.Duration, int64, error) {
	dial := b.dial
	if len(features) > 0 {
		dial = func(ctx context.Context) (*page, error) { return b.dialFeatures(ctx, features...) }
	}
	p, err := dial(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer p.close()
	if err := p.connect(b); err != nil {
		return 0, 0, err
	}
	var ds []time.Duration
	var size int64
	for i := 0; i < c.runs; i++ {
		start := time.Now()
		r, err := p.request(map[string]any{"type": "tools:call", "server": "bench", "tool": "atoms", "arguments": c.atomsArgs("bridged")})
		if err != nil {
			return 0, 0, err
		}
		var reply struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(r, &reply); err != nil || len(reply.Result) == 0 {
			return 0, 0, fmt.Errorf("reply: %v", err)
		}
		ds = append(ds, time.Since(start))
		size = int64(len(reply.Result))
	}
	return median(ds), size, nil
}

func (c *config) smallBridged(ctx context.Context, b *bridgeProc, tabs, calls int, session bool) ([]time.Duration, error) {
	dial := b.dial
	if session {
		dial = b.dialSession
	}
	pages := make([]*page, tabs)
	for i := range pages {
		p, err := dial(ctx)
		if err != nil {
			return nil, err
		}
		defer p.close()
		if err := p.connect(b); err != nil {
			return nil, err
		}
		pages[i] = p
	}
	for i := 0; i < 50; i++ {
		if _, err := pages[0].request(map[string]any{"type": "tools:call", "server": "bench", "tool": "echo", "arguments": map[string]any{"i": i}}); err != nil {
			return nil, err
		}
	}
	return concurrently(tabs, calls, func(tab, i int) error {
		_, err := pages[tab].request(map[string]any{"type": "tools:call", "server": "bench", "tool": "echo", "arguments": map[string]any{"tab": tab, "i": i}})
		return err
	})
}

func (c *config) idleSockets(ctx context.Context, b *bridgeProc) (float64, error) {
	settle := func() int64 {
		time.Sleep(2 * time.Second) // let the runtime return freed memory
		return b.status("VmRSS")
	}
	// One tab first, so that what every bridge pays once is in the baseline.
	first, err := b.dial(ctx)
	if err != nil {
		return 0, err
	}
	defer first.close()
	if _, err := first.request(map[string]any{"type": "tools:servers"}); err != nil {
		return 0, err
	}
	before := settle()
	var pages []*page
	defer func() {
		for _, p := range pages {
			p.conn.Close()
		}
	}()
	for i := 0; i < c.idle; i++ {
		p, err := b.dial(ctx)
		if err != nil {
			return 0, fmt.Errorf("socket %d: %w", i, err)
		}
		pages = append(pages, p)
	}
	// Each socket has been served once (a request answered), then sits idle.
	for _, p := range pages {
		if _, err := p.request(map[string]any{"type": "tools:servers"}); err != nil {
			return 0, err
		}
	}
	after := settle()
	return float64(after-before) / float64(c.idle), nil
}

// ---- supergateway ----

func (c *config) largeSupergateway(ctx context.Context) (time.Duration, error) {
	if _, err := os.Stat(c.supergateway); err != nil {
		return 0, fmt.Errorf("supergateway is not installed at %s (npm ci --prefix .ci/node)", c.supergateway)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("node", c.supergateway, "--stdio", c.exe, "--outputTransport", "ws",
		"--port", strconv.Itoa(port), "--messagePath", "/message", "--logLevel", "none")
	cmd.Env = append(os.Environ(), toolServerEnv())
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	child.InGroup(cmd)
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { child.KillGroup(cmd.Process); cmd.Wait() }()
	var conn *websocket.Conn
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		d := websocket.Dialer{ReadBufferSize: 64 << 10}
		conn, _, err = d.DialContext(ctx, fmt.Sprintf("ws://127.0.0.1:%d/message", port), nil)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("supergateway did not listen: %w", err)
		}
	}
	defer conn.Close()
	conn.SetReadLimit(-1)
	rpc := func(id int, method string, params any) ([]byte, error) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if err := conn.WriteMessage(websocket.TextMessage, b); err != nil {
			return nil, err
		}
		for {
			_, data, err := conn.ReadMessage()
			if err != nil {
				return nil, err
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(data, &m); err != nil {
				return nil, err
			}
			if string(m.ID) == strconv.Itoa(id) {
				if m.Error != nil {
					return nil, fmt.Errorf("%s", m.Error)
				}
				return m.Result, nil
			}
		}
	}
	if _, err := rpc(1, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "benchharness", "version": "1"}}); err != nil {
		return 0, err
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	conn.WriteMessage(websocket.TextMessage, b)
	var ds []time.Duration
	for i := 0; i < c.runs; i++ {
		start := time.Now()
		if _, err := rpc(10+i, "tools/call", map[string]any{"name": "atoms", "arguments": c.atomsArgs("supergateway")}); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(start))
	}
	return median(ds), nil
}

// floorAndHop runs BenchmarkFloor and BenchmarkJupyterHop (package
// cmd/megane-jupyter-bridge) c.runs times each, 5 results per run, and
// returns their rows with the medians: 6, the bridge's own throughput
// against a plain WebSocket server; 7, the Jupyter hop against the bridge
// alone in the same run.
func (c *config) floorAndHop(ctx context.Context) ([]row, error) {
	const pkg = "./cmd/megane-jupyter-bridge"
	floor, _, err := goBench(ctx, pkg, "^BenchmarkFloor$", c.runs)
	if err != nil {
		return nil, err
	}
	nsop := func(name string) float64 { return metricMedian(floor[name], "ns/op") }
	br, gor, chunked, pipe := nsop("BenchmarkFloor/bridge"), nsop("BenchmarkFloor/gorilla"), nsop("BenchmarkFloor/gorilla-chunked"), nsop("BenchmarkFloor/pipe")
	rows := []row{{"6. 40 MB result without the tool's work (BenchmarkFloor): bridge / plain gorilla server, one message / the same, as tools:chunk frames / a pipe",
		fmt.Sprintf("%.0f / %.0f / %.0f / %.0f ms", br/1e6, gor/1e6, chunked/1e6, pipe/1e6),
		fmt.Sprintf("bridge %.2f × gorilla, %.2f × chunked", br/gor, br/chunked), verdict(br <= 1.5*gor, "≤ 1.5 × gorilla")}}
	if st := nsop("BenchmarkFloor/bridge-stream"); st > 0 {
		rows = append(rows, row{"6. same, the page with streamed results (feature stream)", fmt.Sprintf("%.0f ms", st/1e6),
			fmt.Sprintf("%.2f × gorilla, %.2f × held whole", st/gor, st/br), ""})
	}
	if alt := floor["BenchmarkFloor/alternating"]; len(alt) > 0 {
		// The verdict from the two timed in turn, per run: this machine's
		// speed changes over minutes by more than their difference.
		var each []string
		worst := 0.0
		for _, r := range alt {
			each = append(each, fmt.Sprintf("%.0f / %.0f ms (%.2f ×)", r["stream-ms/op"], r["gorilla-ms/op"], r["stream/gorilla"]))
			worst = max(worst, r["stream/gorilla"])
		}
		rows = append(rows, row{"6. same, streamed, and the gorilla server, one call each in turn (BenchmarkFloor/alternating), per run: streamed / gorilla",
			strings.Join(each, "; "), fmt.Sprintf("median %.2f ×", metricMedian(alt, "stream/gorilla")), verdict(worst <= 1.3, "≤ 1.3 × gorilla in every run")})
	}

	var env []string
	if c.oldBridge != "" {
		old, err := filepath.Abs(c.oldBridge)
		if err != nil {
			return nil, err
		}
		env = append(env, "MEGANE_BENCH_OLD_BRIDGE="+old) // the earlier binary behind the same proxies
	}
	hop, skipped, err := goBench(ctx, pkg, "^BenchmarkJupyterHop$/^(real_proxy|hub|stand-in)$//^frame_limit=8MiB$", c.runs, env...)
	if err != nil {
		return nil, err
	}
	for _, r := range []struct{ name, what, target string }{
		{"BenchmarkJupyterHop/hub/jupyterhub=5.2+configurable-http-proxy+real_proxy/frame_limit=8MiB", "7. through JupyterHub 5.2 + configurable-http-proxy + jupyter-server-proxy 4.4 (jupyter_server 2.15)", "≤ 1.15 × alone"},
		{"BenchmarkJupyterHop/real_proxy/jupyter_server=2.15/frame_limit=8MiB", "7. through jupyter-server-proxy 4.4 (jupyter_server 2.15)", "≤ 1.15 × alone"},
		{"BenchmarkJupyterHop/stand-in/jupyter_server=1.23/frame_limit=8MiB", "7. through the tornado stand-in (jupyter_server 1.23)", "≤ 1.2 × alone"},
	} {
		runs := hop[r.name]
		if len(runs) == 0 {
			why := "not run"
			if skipped != "" {
				why = "skipped: " + oneLine(skipped)
			}
			rows = append(rows, row{r.what + ": alone / proxied", why, "", ""})
			continue
		}
		ratio := metricMedian(runs, "proxied/alone")
		max, _ := strconv.ParseFloat(strings.Fields(strings.TrimPrefix(r.target, "≤ "))[0], 64)
		rows = append(rows, row{r.what + ": alone / proxied",
			fmt.Sprintf("%.0f / %.0f ms", metricMedian(runs, "alone-ms/op"), metricMedian(runs, "proxied-ms/op")),
			fmt.Sprintf("%.2f × alone", ratio), verdict(ratio <= max, r.target)})
		bin := metricMedian(runs, "proxied-binary-ms/op")
		rows = append(rows, row{"7. same, the page with binary chunk frames: proxied",
			fmt.Sprintf("%.0f ms", bin),
			fmt.Sprintf("%.2f × alone (text), %.2f × proxied text", metricMedian(runs, "proxied-binary/alone"), bin/metricMedian(runs, "proxied-ms/op")), ""})
		if st := metricMedian(runs, "proxied-stream-ms/op"); st > 0 {
			compare, target := fmt.Sprintf("%.2f × alone (text)", st/metricMedian(runs, "alone-ms/op")), ""
			if plain := metricMedian(runs, "plain-ms/op"); plain > 0 {
				compare += fmt.Sprintf("; the plain gorilla server behind the same proxies: %.0f ms, %.2f × it", plain, st/plain)
				target = verdict(st <= 1.15*plain, "≤ 1.15 × plain")
			}
			rows = append(rows, row{"7. same, the page with streamed results: proxied", fmt.Sprintf("%.0f ms", st), compare, target})
			if old := metricMedian(runs, "old-ms/op"); old > 0 {
				rows = append(rows, row{"7. same, the earlier binary (-old-bridge) behind the same proxies, its page with binary frames, alternating: earlier / this one streamed",
					fmt.Sprintf("%.0f / %.0f ms", old, st), fmt.Sprintf("%.2f × the earlier binary", metricMedian(runs, "proxied-stream/old")), verdict(st < old, "lower than the earlier binary")})
			}
		}
	}
	return rows, nil
}

// goBench runs go test's benchmarks matching pattern in pkg, count times,
// 5 iterations each, and returns each benchmark's metrics per run (by name,
// without the -N suffix), and the first reason a benchmark gave for
// skipping, if any.
func goBench(ctx context.Context, pkg, pattern string, count int, env ...string) (map[string][]map[string]float64, string, error) {
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", pattern, "-benchtime", "5x", "-count", strconv.Itoa(count), "-timeout", "30m", pkg)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, "", fmt.Errorf("go test -bench %s %s: %w\n%s", pattern, pkg, err, out)
	}
	res := map[string][]map[string]float64{}
	skipped := ""
	lines := strings.Split(string(out), "\n")
	for i, line := range lines {
		if strings.Contains(line, "--- SKIP") && skipped == "" && i+1 < len(lines) {
			skipped = strings.TrimSpace(lines[i+1])
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[:i]
		}
		m := map[string]float64{}
		for j := 2; j+1 < len(f); j += 2 {
			if v, err := strconv.ParseFloat(f[j], 64); err == nil {
				m[f[j+1]] = v
			}
		}
		res[name] = append(res[name], m)
	}
	return res, skipped, nil
}

// metricMedian is the median of metric unit over runs (0 if none has it).
func metricMedian(runs []map[string]float64, unit string) float64 {
	var v []float64
	for _, r := range runs {
		if x, ok := r[unit]; ok {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0
	}
	return median(v)
}

// bigRun is one large result on a fresh bridge.
type bigRun struct {
	total, first time.Duration // the call's time, and to its first streamed frame (0: not streamed)
	hwm          int64         // the bridge's peak RSS (VmHWM)
}

// admin400 lets a bridge take a 400 MB result.
const admin400 = "[limits]\nresult_limit = \"512MiB\"\n"

// bigOnce starts bin afresh and has tabs pages, with features, each ask
// at once for a result of n bytes from the bridgetest "big" tool (the
// padding costs the server nothing: the bridge's own work is measured).
func (c *config) bigOnce(ctx context.Context, bin string, n int64, tabs int, features ...string) (bigRun, error) {
	admin := ""
	if n > 200<<20 {
		admin = admin400
	}
	b, err := c.startBridgeWith(ctx, bin, admin)
	if err != nil {
		return bigRun{}, err
	}
	defer b.stop()
	pages := make([]*page, tabs)
	for i := range pages {
		p, err := b.dial(ctx)
		if len(features) > 0 {
			if err == nil {
				p.close()
			}
			p, err = b.dialFeatures(ctx, features...)
		}
		if err != nil {
			return bigRun{}, err
		}
		defer p.close()
		if err := p.connect(b); err != nil {
			return bigRun{}, err
		}
		pages[i] = p
	}
	var wg sync.WaitGroup
	errs := make([]error, tabs)
	firsts := make([]time.Duration, tabs)
	start := time.Now()
	for i, p := range pages {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := p.request(map[string]any{"type": "tools:call", "server": "bench", "tool": "big", "arguments": map[string]any{"bytes": n}})
			if err == nil && (int64(len(r)) < n || !bytes.HasSuffix(r, []byte(`"}}}`))) {
				err = fmt.Errorf("a reply of %d bytes for %d", len(r), n)
			}
			errs[i] = err
			if !p.firstFrame.IsZero() {
				firsts[i] = p.firstFrame.Sub(start)
			}
		}()
	}
	wg.Wait()
	total := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return bigRun{}, err
	}
	return bigRun{total: total, first: slices.Min(firsts), hwm: b.status("VmHWM")}, nil
}

// bigMedian runs bigOnce c.runs times and returns the medians.
func (c *config) bigMedian(ctx context.Context, bin string, n int64, tabs int, features ...string) (bigRun, error) {
	var totals, firsts []time.Duration
	var hwms []int64
	for range c.runs {
		r, err := c.bigOnce(ctx, bin, n, tabs, features...)
		if err != nil {
			return bigRun{}, fmt.Errorf("%d MB × %d tab(s) %q: %w", n/1e6, tabs, features, err)
		}
		totals, firsts, hwms = append(totals, r.total), append(firsts, r.first), append(hwms, r.hwm)
	}
	return bigRun{total: median(totals), first: median(firsts), hwm: median(hwms)}, nil
}

// streamRows measures streamed results (the feature "stream"), each
// size and kind on fresh bridges: 8, one page, 40 and 400 MB, streamed
// against held whole (binary chunk frames, what the page had before);
// 9, ten pages at once, each receiving 40 MB.
func (c *config) streamRows(ctx context.Context) ([]row, error) {
	stream := []string{"binary", "stream"}
	whole, err := c.bigMedian(ctx, c.bridgeBin, 40e6, 1, "binary")
	if err != nil {
		return nil, err
	}
	s40, err := c.bigMedian(ctx, c.bridgeBin, 40e6, 1, stream...)
	if err != nil {
		return nil, err
	}
	s400, err := c.bigMedian(ctx, c.bridgeBin, 400e6, 1, stream...)
	if err != nil {
		return nil, err
	}
	within := float64(s400.hwm)/float64(s40.hwm) - 1
	rows := []row{
		{"8. 40 MB result (bridgetest big, fast page), held whole, binary chunk frames: time / first byte at the page / bridge peak RSS",
			fmt.Sprintf("%s / %s / %s", ms(whole.total), ms(whole.total), mib(whole.hwm)), "", ""},
		{"8. same, streamed: time / first frame / peak RSS",
			fmt.Sprintf("%s / %s / %s", ms(s40.total), ms(s40.first), mib(s40.hwm)),
			fmt.Sprintf("%.2f × the time, %.2f × the RSS of held whole", s40.total.Seconds()/whole.total.Seconds(), float64(s40.hwm)/float64(whole.hwm)),
			verdict(s40.hwm <= 40<<20, "RSS ≤ 40 MiB")},
		{"8. 400 MB result, streamed: time / first frame / peak RSS",
			fmt.Sprintf("%s / %s / %s", ms(s400.total), ms(s400.first), mib(s400.hwm)),
			fmt.Sprintf("RSS %+.0f %% of 40 MB's", within*100),
			verdict(s400.hwm <= 40<<20 && within <= 0.10 && within >= -0.10, "RSS ≤ 40 MiB, within 10 % of 40 MB's")},
	}
	if c.oldBridge != "" {
		old, err := c.bigMedian(ctx, c.oldBridge, 40e6, 1, "binary")
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{"8. 40 MB, held whole, the earlier binary (-old-bridge): time / peak RSS",
			fmt.Sprintf("%s / %s", ms(old.total), mib(old.hwm)), fmt.Sprintf("streamed: %.2f × the time", s40.total.Seconds()/old.total.Seconds()), ""})
	}
	tenWhole, err := c.bigMedian(ctx, c.bridgeBin, 40e6, 10, "binary")
	if err != nil {
		return nil, err
	}
	tenStream, err := c.bigMedian(ctx, c.bridgeBin, 40e6, 10, stream...)
	if err != nil {
		return nil, err
	}
	rows = append(rows,
		row{"9. ten tabs each receiving 40 MB at once, held whole: total time / first frame / peak RSS",
			fmt.Sprintf("%s / %s / %s", ms(tenWhole.total), ms(tenWhole.total), mib(tenWhole.hwm)), "", ""},
		row{"9. same, streamed: total time / first frame / peak RSS",
			fmt.Sprintf("%s / %s / %s", ms(tenStream.total), ms(tenStream.first), mib(tenStream.hwm)),
			fmt.Sprintf("%.2f × the time, %.2f × the RSS of held whole", tenStream.total.Seconds()/tenWhole.total.Seconds(), float64(tenStream.hwm)/float64(tenWhole.hwm)), ""})
	if c.oldBridge != "" {
		old, err := c.bigMedian(ctx, c.oldBridge, 40e6, 10, "binary")
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{"9. same, the earlier binary (-old-bridge): total time / peak RSS",
			fmt.Sprintf("%s / %s", ms(old.total), mib(old.hwm)),
			fmt.Sprintf("streamed: %.2f × the time, %.2f × the RSS", tenStream.total.Seconds()/old.total.Seconds(), float64(tenStream.hwm)/float64(old.hwm)), ""})
	}
	return rows, nil
}
