package bridgetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fixture returns the path of a megane-reference fixture, skipping (or, in CI,
// failing) when the shared fixtures are not on this machine.
func fixture(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(FixtureDir(), name)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("fixture %s missing: %v", p, err)
		}
		t.Skipf("fixture %s not on this machine: %v", p, err)
	}
	return p
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// TestGoSDKClient drives every built-in tool of a re-executed server through
// go-sdk's client.
func TestGoSDKClient(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "journal")
	c := startChild(t, Mode{Name: "sdk", Journal: journal, PageSize: 3})
	var mu sync.Mutex // guards progress and listChanged
	var progress []string
	listChanged := make(chan struct{}, 1)
	cs := connectSDK(t, c.stdout, c.stdin, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, r.Params.Message)
			mu.Unlock()
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case listChanged <- struct{}{}:
			default:
			}
		},
	})
	defer cs.Close()
	if got := cs.InitializeResult().ServerInfo.Name; got != "sdk" {
		t.Errorf("serverInfo.name %q", got)
	}
	want := []string{"echo", "slow", "big", "atoms", "crash", "fail", "toolerror", "listchanged"}
	if got := toolNames(t, cs); !reflect.DeepEqual(got, want) {
		t.Errorf("tools over pages of 3: %v, want %v", got, want)
	}
	ctx := context.Background()
	call := func(name string, args any, token any) (*mcp.CallToolResult, error) {
		p := &mcp.CallToolParams{Name: name, Arguments: args}
		if token != nil {
			p.SetProgressToken(token)
		}
		return cs.CallTool(ctx, p)
	}

	t.Run("echo", func(t *testing.T) {
		res, err := call("echo", map[string]any{"tag": "a", "n": 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(res.StructuredContent)
		if string(got) != `{"echo":{"n":1,"tag":"a"}}` {
			t.Errorf("structuredContent %s", got)
		}
	})
	t.Run("slow", func(t *testing.T) {
		res, err := call("slow", map[string]any{"steps": 3, "intervalMs": 1, "tag": "s1"}, "p1")
		if err != nil || res.IsError {
			t.Fatalf("%v %v", err, res)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			got := slices.Clone(progress)
			mu.Unlock()
			if len(got) == 3 {
				if !reflect.DeepEqual(got, []string{"s1 step 1", "s1 step 2", "s1 step 3"}) {
					t.Errorf("progress %v", got)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("progress %v after 10 s", got)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	t.Run("big", func(t *testing.T) {
		res, err := call("big", map[string]any{"bytes": 20 << 20, "tag": "b"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sc := res.StructuredContent.(map[string]any)
		if sc["tag"] != "b" || len(sc["padding"].(string)) < 20<<20-200 {
			t.Errorf("big result tag %v, padding %d bytes", sc["tag"], len(sc["padding"].(string)))
		}
	})
	t.Run("atoms", func(t *testing.T) {
		res, err := call("atoms", map[string]any{"n": 1000, "seed": 4}, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res.StructuredContent)
		var r struct {
			Contract  int `json:"contract"`
			Structure struct {
				Elements  []int     `json:"elements"`
				Positions []float64 `json:"positions"`
				Cell      []float64 `json:"cell"`
				Bonds     [][]int   `json:"bonds"`
				ResNames  []string  `json:"residueNames"`
				ResIDs    []int     `json:"residueIds"`
			} `json:"structure"`
			Provenance map[string]any `json:"provenance"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		s := r.Structure
		if r.Contract != 1 || len(s.Elements) != 1000 || len(s.Positions) != 3000 || len(s.Cell) != 9 || r.Provenance["seed"] != 4.0 {
			t.Errorf("atoms result: contract %d, %d elements, %d positions, cell %v, provenance %v", r.Contract, len(s.Elements), len(s.Positions), s.Cell, r.Provenance)
		}
		// 333 whole molecules and one lone O: 666 complete O-H bonds.
		if len(s.Bonds) != 666 || len(s.ResNames) != 1000 || len(s.ResIDs) != 1000 || s.ResIDs[999] != 334 {
			t.Fatalf("atoms result: %d bonds, %d residue names, %d residue ids", len(s.Bonds), len(s.ResNames), len(s.ResIDs))
		}
		for _, b := range s.Bonds {
			if len(b) != 2 || s.Elements[b[0]] != 8 || s.Elements[b[1]] != 1 || b[1]/3 != b[0]/3 {
				t.Fatalf("bond %v is not an O-H bond within one molecule", b)
			}
		}
	})
	t.Run("toolerror", func(t *testing.T) {
		res, err := call("toolerror", map[string]any{"tag": "x"}, nil)
		if err != nil || !res.IsError || res.Content[0].(*mcp.TextContent).Text != "simulated tool error x" {
			t.Errorf("%v %+v", err, res)
		}
	})
	t.Run("fail", func(t *testing.T) {
		_, err := call("fail", map[string]any{"code": -32001, "message": "boom"}, nil)
		var werr *jsonrpc.Error
		if !errorsAs(err, &werr) || werr.Code != -32001 || werr.Message != "boom" {
			t.Errorf("error %v", err)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		if _, err := call("nope", nil, nil); err == nil || !strings.Contains(err.Error(), "unknown tool") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("unknown method", func(t *testing.T) {
		_, err := cs.ListResources(ctx, nil)
		var werr *jsonrpc.Error
		if !errorsAs(err, &werr) || werr.Code != -32601 {
			t.Errorf("resources/list: %v, want -32601", err)
		}
	})
	t.Run("ping", func(t *testing.T) {
		if err := cs.Ping(ctx, nil); err != nil {
			t.Error(err)
		}
	})
	t.Run("listchanged", func(t *testing.T) {
		if _, err := call("listchanged", nil, nil); err != nil {
			t.Fatal(err)
		}
		select {
		case <-listChanged:
		case <-time.After(10 * time.Second):
			t.Fatal("no notifications/tools/list_changed")
		}
		if got := toolNames(t, cs); !slices.Contains(got, "added") {
			t.Errorf("listing after listchanged %v", got)
		}
		res, err := call("added", map[string]any{"k": true}, nil)
		if err != nil || res.IsError {
			t.Errorf("calling added: %v", err)
		}
	})
	cs.Close()
	if err := c.wait(t); err != nil {
		t.Errorf("the server exited with %v after stdin closed", err)
	}
	entries, err := ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 || !entries[0].Start || !slices.Contains(entries[0].Env, EnvVar) {
		t.Errorf("no start entry naming the environment: %+v", entries[:min(1, len(entries))])
	}
	methods := Methods(entries)
	for _, m := range []string{"initialize", "notifications/initialized", "tools/list", "tools/call", "resources/list", "ping"} {
		if !slices.Contains(methods, m) {
			t.Errorf("journal lacks %s: %v", m, methods)
		}
	}
	for _, e := range entries {
		if e.Method == "resources/list" && !e.Unknown {
			t.Errorf("resources/list not marked unknown")
		}
	}
}

func errorsAs(err error, target **jsonrpc.Error) bool {
	for err != nil {
		if e, ok := err.(*jsonrpc.Error); ok {
			*target = e
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// TestCancel checks that notifications/cancelled stops a slow call (nothing
// more is sent for it) and is journaled, and that ignoreCancel carries on.
func TestCancel(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "journal")
	p := startInProcess(t, Mode{Journal: journal})
	c := newRaw(t, p.toServer, p.fromServer)
	c.initialize()

	c.send(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"slow","arguments":{"steps":1000,"intervalMs":20,"tag":"c1"},"_meta":{"progressToken":"t1"}}}`)
	if m := c.msg(nil); m.Method != "notifications/progress" {
		t.Fatalf("first message %+v, want progress", m)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1","reason":"test"}}`)
	// Messages already on their way may precede the first ping's answer;
	// after it, the cancellation has been handled and nothing more may come
	// for c1 before the second ping's answer, 200 ms (ten steps) later.
	c.send(`{"jsonrpc":"2.0","id":"p1","method":"ping"}`)
	for m := c.msg(nil); string(m.ID) != `"p1"`; m = c.msg(nil) {
		if string(m.ID) == `"c1"` {
			t.Fatalf("the cancelled call answered: %+v", m)
		}
	}
	time.Sleep(200 * time.Millisecond)
	c.send(`{"jsonrpc":"2.0","id":"p2","method":"ping"}`)
	if m := c.msg(nil); string(m.ID) != `"p2"` {
		t.Fatalf("after cancellation got %s %s, want only the ping answer", m.Method, m.ID)
	}

	c.send(`{"jsonrpc":"2.0","id":"c2","method":"tools/call","params":{"name":"slow","arguments":{"steps":3,"intervalMs":20,"tag":"c2","ignoreCancel":true},"_meta":{"progressToken":"t2"}}}`)
	if m := c.msg(nil); m.Method != "notifications/progress" {
		t.Fatalf("first message %+v, want progress", m)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c2"}}`)
	for m := c.msg(nil); ; m = c.msg(nil) {
		if string(m.ID) == `"c2"` {
			if !bytes.Contains(m.Result, []byte(`"tag":"c2"`)) {
				t.Errorf("result %s", m.Result)
			}
			break
		}
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"gone"}}`)
	c.send(`{"jsonrpc":"2.0","id":"p3","method":"ping"}`)
	c.msg(nil)

	entries, err := ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range entries {
		if e.Method == "notifications/cancelled" {
			got[string(e.Cancelled)] = *e.Matched
		}
	}
	if want := map[string]bool{`"c1"`: true, `"c2"`: true, `"gone"`: false}; !reflect.DeepEqual(got, want) {
		t.Errorf("journaled cancellations %v, want %v", got, want)
	}
}

func TestCrash(t *testing.T) {
	c := startChild(t, Mode{})
	cs := connectSDK(t, c.stdout, c.stdin, nil)
	defer cs.Close()
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "crash"}); err == nil {
		t.Fatal("the crash call returned a result")
	}
	if code := exitCode(c.wait(t)); code != 3 {
		t.Errorf("exit status %d, want 3", code)
	}
	if !strings.Contains(c.stderr.String(), "fatal: simulated crash") {
		t.Errorf("stderr %q", c.stderr.String())
	}
}

func TestExitBeforeInit(t *testing.T) {
	c := startChild(t, Mode{ExitBeforeInit: true})
	if code := exitCode(c.wait(t)); code != 2 {
		t.Errorf("exit status %d, want 2", code)
	}
	if !strings.Contains(c.stderr.String(), "simulated failure before initialize") {
		t.Errorf("stderr %q", c.stderr.String())
	}
}

func TestHangInit(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "journal")
	p := startInProcess(t, Mode{HangInit: true, Journal: journal})
	c := newRaw(t, p.toServer, p.fromServer)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if m := c.msg(nil); string(m.ID) != "2" {
		t.Errorf("first answer is for id %s, want the ping (initialize must hang)", m.ID)
	}
	entries, _ := ReadJournal(journal)
	if ms := Methods(entries); !reflect.DeepEqual(ms, []string{"initialize", "ping"}) {
		t.Errorf("journal %v", ms)
	}
	if entries[1].ProtocolVersion != "2025-11-25" {
		t.Errorf("journaled protocol version %q", entries[1].ProtocolVersion)
	}
}

func TestBannerAndJunk(t *testing.T) {
	c := startChild(t, Mode{Banner: DefaultJunk(), JunkEveryN: 1})
	rc := newRaw(t, c.stdin, c.stdout)
	for _, want := range DefaultJunk() {
		if got := rc.line(); got != want {
			t.Fatalf("banner line %q, want %q", got, want)
		}
	}
	junk := 0
	rc.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`)
	m := rc.msg(&junk)
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	json.Unmarshal(m.Result, &res)
	if res.ProtocolVersion != "2025-03-26" {
		t.Errorf("protocolVersion %q, want the requested 2025-03-26", res.ProtocolVersion)
	}
	rc.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	rc.msg(&junk)
	if junk != 1 {
		t.Errorf("%d junk lines between two messages, want 1", junk)
	}
}

func TestStderrFlood(t *testing.T) {
	c := startChild(t, Mode{StderrFlood: 4 << 20})
	cs := connectSDK(t, c.stdout, c.stdin, nil)
	if err := cs.Ping(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	c.wait(t)
	if n := c.stderr.Len(); n != 4<<20 {
		t.Errorf("%d bytes of stderr, want %d", n, 4<<20)
	}
}

func TestFixtures(t *testing.T) {
	list := fixture(t, "tools-list.json")
	callFile := fixture(t, "call-polymer_chain.json")
	extra := json.RawMessage(`{"name": "extra", "inputSchema": {"type": "object"}}`)
	p := startInProcess(t, Mode{FixtureList: list, PageSize: 2, FixtureCalls: map[string]string{"polymer_chain": callFile}, Tools: []json.RawMessage{extra}})
	c := newRaw(t, p.toServer, p.fromServer)
	c.initialize()

	var doc struct {
		Tools []json.RawMessage `json:"tools"`
	}
	data, _ := os.ReadFile(list)
	json.Unmarshal(data, &doc)
	var want [][]byte
	for _, tool := range doc.Tools {
		var b bytes.Buffer
		json.Compact(&b, tool)
		want = append(want, b.Bytes())
	}
	want = append(want, []byte(`{"name":"extra","inputSchema":{"type":"object"}}`))

	var got [][]byte
	cursor := ""
	for page := 0; ; page++ {
		if cursor == "" {
			c.send(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, 10+page)
		} else {
			c.send(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{"cursor":%q}}`, 10+page, cursor)
		}
		var res struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		json.Unmarshal(c.msg(nil).Result, &res)
		if len(res.Tools) > 2 {
			t.Errorf("page of %d tools, PageSize 2", len(res.Tools))
		}
		for _, tool := range res.Tools {
			got = append(got, tool)
		}
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d tools, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("tool %d differs from the compacted fixture", i)
		}
	}

	var call struct {
		Result json.RawMessage `json:"result"`
	}
	data, _ = os.ReadFile(callFile)
	json.Unmarshal(data, &call)
	var wantRes bytes.Buffer
	json.Compact(&wantRes, call.Result)
	c.send(`{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"polymer_chain","arguments":{}}}`)
	line := c.line()
	wantLine := `{"jsonrpc":"2.0","id":"call","result":` + wantRes.String() + `}`
	if line != wantLine {
		t.Errorf("call answer differs from the compacted fixture result (got %d bytes, want %d)", len(line), len(wantLine))
	}
	c.send(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"extra","arguments":{"a":1}}}`)
	if m := c.msg(nil); !bytes.Contains(m.Result, []byte(`"echo":{"a":1}`)) {
		t.Errorf("extra tool answered %s", m.Result)
	}
	c.send(`{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"echo"}}`)
	if m := c.msg(nil); m.Error == nil {
		t.Errorf("echo is not listed with a fixture list, but answered %s", m.Result)
	}
}

// TestBigExactSize checks the streamed line length on the raw stream,
// beyond go-sdk's default frame cap.
func TestBigExactSize(t *testing.T) {
	p := startInProcess(t, Mode{})
	c := newRaw(t, p.toServer, p.fromServer)
	c.initialize()
	const size = 40 << 20
	c.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"big","arguments":{"bytes":%d}}}`, size)
	line := c.line()
	if len(line) != size {
		t.Errorf("line of %d bytes, want %d", len(line), size)
	}
	if !json.Valid([]byte(line)) {
		t.Errorf("the big line is not valid JSON")
	}
}

// TestIDLast: with Mode.IDLast every response, a big one included, carries
// its id after its result or error, and stays exactly as long.
func TestIDLast(t *testing.T) {
	p := startInProcess(t, Mode{IDLast: true})
	c := newRaw(t, p.toServer, p.fromServer)
	const size = 1 << 20
	for id, req := range []string{
		1: `"method":"initialize","params":{"protocolVersion":"2025-11-25"}`,
		2: `"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}`,
		3: `"method":"nothing/here"`,
		4: fmt.Sprintf(`"method":"tools/call","params":{"name":"big","arguments":{"bytes":%d}}`, size),
	} {
		if id == 0 {
			continue
		}
		// One at a time: the pipes hold nothing, and a server answers
		// initialize before it reads on.
		c.send(`{"jsonrpc":"2.0","id":%d,%s}`, id, req)
		line := c.line()
		if !strings.HasSuffix(line, fmt.Sprintf(`,"id":%d}`, id)) || strings.Count(line, `"id":`) != 1 {
			t.Errorf("answer %d: %.100s … %s, want the id last", id, line, line[max(0, len(line)-20):])
		}
		if !json.Valid([]byte(line)) {
			t.Errorf("answer %d is not valid JSON", id)
		}
		if id == 4 && len(line) != size {
			t.Errorf("big line of %d bytes with the id last, want %d", len(line), size)
		}
	}
}

// TestStart: what a server does at start, before reading anything — its pid
// file, its stderr in the documented order — and ExitAfterStart's exit.
func TestStart(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	c := startChild(t, Mode{PidFile: pidFile, StderrLongLine: 100000, StderrFlood: 97, StderrFloodLines: 3,
		Stderr: []string{"last words"}, ExitAfterStart: true})
	if code := exitCode(c.wait(t)); code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(c.cmd.Process.Pid) {
		t.Errorf("pid file %q (%v), want %d", b, err, c.cmd.Process.Pid)
	}
	want := strings.Repeat("e", 100000) + "\n" + strings.Repeat("noise ", 16) + "\nline 0\nline 1\nline 2\nlast words\n"
	if got := c.stderr.String(); got != want {
		t.Errorf("stderr of %d bytes, want %d; it ends %q", len(got), len(want), got[max(0, len(got)-150):])
	}
	if out, _ := io.ReadAll(c.stdout); len(out) != 0 {
		t.Errorf("stdout %q, want nothing", out)
	}
}

// TestDeaf: a deaf server writes its banner and then reads nothing: a
// request and the end of its stdin go unnoticed (no answer, no journal
// entry, no exit) until it is killed.
func TestDeaf(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "journal")
	c := startChild(t, Mode{Deaf: true, Banner: []string{"hello"}, Journal: journal})
	if _, err := c.stdin.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	c.stdin.Close()
	r := newRaw(t, nil, c.stdout)
	if got := r.line(); got != "hello" {
		t.Errorf("banner %q", got)
	}
	c.cmd.Process.Kill()
	if code := exitCode(c.wait(t)); code != -1 {
		t.Errorf("exit %v, want killed: a deaf server does not see its stdin end", c.err)
	}
	if rest, _ := io.ReadAll(r.r); len(rest) != 0 {
		t.Errorf("a deaf server wrote %q after its banner", rest)
	}
	entries, err := ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Method != "" || e.ParseError || e.Response != nil {
			t.Errorf("a deaf server journaled a message: %+v", e)
		}
	}
}

func TestParseError(t *testing.T) {
	p := startInProcess(t, Mode{})
	c := newRaw(t, p.toServer, p.fromServer)
	c.send(`this is not json`)
	if m := c.msg(nil); m.Error == nil || m.Error.Code != -32700 {
		t.Errorf("answer %+v, want -32700", m)
	}
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		spec    string
		wantErr bool
	}{
		{`{}`, false},
		{`{"name":"x","pageSize":2,"fixtureCalls":{"a":"b"}}`, false},
		{`{"nme":"x"}`, true},
		{`{"pageSize":-1}`, true},
		{`{"spawnGrandchild":true}`, true},
		{`{"spawnDetached":true}`, true},
		{`{"stderrLongLine":-1}`, true},
		{`{"stderrFloodLines":-1}`, true},
		{`not json`, true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			_, err := ParseMode(tt.spec)
			if (err != nil) != tt.wantErr {
				t.Errorf("ParseMode(%s) = %v, wantErr %v", tt.spec, err, tt.wantErr)
			}
		})
	}
	m := Mode{Name: "n", PageSize: 3, Banner: []string{"a"}}
	back, err := ParseMode(strings.TrimPrefix(m.Env(), EnvVar+"="))
	if err != nil || !reflect.DeepEqual(back, m) {
		t.Errorf("Env round trip: %+v, %v", back, err)
	}
}

func FuzzParseMode(f *testing.F) {
	f.Add(`{"name":"x","junkEveryN":2}`)
	f.Add(`{"tools":[{"name":"a"}]}`)
	f.Fuzz(func(t *testing.T, spec string) {
		ParseMode(spec)
	})
}

// FuzzHandleLine feeds arbitrary lines to a server: it must never panic and
// never write anything but whole JSON lines.
func FuzzHandleLine(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"1"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":[1]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{}}}`))
	f.Add([]byte(`{"id":null,"result":1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.ContainsAny(line, "\n") {
			return
		}
		var out bytes.Buffer
		in := bytes.NewReader(append(slices.Clone(line), '\n'))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// Fuzzed calls to slow or crash are cut short by the input's end.
		Serve(ctx, in, &out, nil, Mode{})
		for _, l := range bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n")) {
			if len(l) > 0 && !json.Valid(l) {
				t.Fatalf("invalid output line %q for input %q", l, line)
			}
		}
	})
}

// TestPythonModes: the modes that behave like the official Python SDK's
// releases answer as those releases do. mcp 1.29.0: -32602 for
// server/discover, initialize at 2025-11-25, and a warning of about 260
// lines, none over 80 columns, on stderr at start. mcp 2.0.0: a result for
// server/discover naming 2026-07-28 only with an empty version, -32022
// for initialize, and results carrying resultType and the serverInfo.
func TestPythonModes(t *testing.T) {
	t.Run("mcp 1.29.0", func(t *testing.T) {
		p := startInProcess(t, PythonMCP1Mode())
		c := newRaw(t, p.toServer, p.fromServer)
		c.send(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`)
		if m := c.msg(nil); m.Error == nil || m.Error.Code != -32602 {
			t.Errorf("server/discover answered %+v, want -32602", m)
		}
		c.initialize()
		lines := strings.Split(strings.TrimSuffix(p.stderr.String(), "\n"), "\n")
		if len(lines) < 250 || len(lines) > 270 {
			t.Errorf("%d stderr lines, want about 260", len(lines))
		}
		for _, l := range lines {
			if len(l) > 80 {
				t.Errorf("a stderr line of %d columns: %q", len(l), l)
				break
			}
		}
	})
	t.Run("mcp 2.0.0", func(t *testing.T) {
		p := startInProcess(t, PythonMCP2Mode())
		c := newRaw(t, p.toServer, p.fromServer)
		c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
		if m := c.msg(nil); m.Error == nil || m.Error.Code != -32022 {
			t.Errorf("initialize answered %+v, want -32022", m)
		}
		c.send(`{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{}}`)
		m := c.msg(nil)
		var d struct {
			SupportedVersions []string
			Meta              map[string]struct{ Name, Version *string } `json:"_meta"`
		}
		json.Unmarshal(m.Result, &d)
		info := d.Meta["io.modelcontextprotocol/serverInfo"]
		if len(d.SupportedVersions) != 1 || d.SupportedVersions[0] != "2026-07-28" || info.Version == nil || *info.Version != "" {
			t.Errorf("server/discover answered %s", m.Result)
		}
		c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}`)
		m = c.msg(nil)
		var r struct {
			ResultType string                     `json:"resultType"`
			Meta       map[string]json.RawMessage `json:"_meta"`
		}
		json.Unmarshal(m.Result, &r)
		if r.ResultType != "complete" || r.Meta["io.modelcontextprotocol/serverInfo"] == nil {
			t.Errorf("tools/call answered %s", m.Result)
		}
	})
}
