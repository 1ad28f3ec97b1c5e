package stdio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
	"github.com/megane-labs/megane-jupyter-bridge/child/childtest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testExe is this test binary, which runs the test servers.
func testExe(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// serverOptions runs the test binary as a bridgetest server of mode.
func serverOptions(t testing.TB, mode bridgetest.Mode) Options {
	return Options{
		Name:    "lab-tools",
		Command: testExe(t),
		Args:    []string{"-test.run=^$"},
		Env:     append(os.Environ(), mode.Env()),
	}
}

// builtinTools are the names of bridgetest's built-in tools, in the order
// its tools/list gives them.
const builtinTools = "echo,slow,big,atoms,crash,fail,toolerror,listchanged"

// syncBuffer is a log sink safe for concurrent use.
type syncBuffer = bridgetest.Buffer

func connectClient(t *testing.T, ctx context.Context, tr mcp.Transport) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return cs
}

// echoText calls bridgetest's echo tool with {"text": text} and returns
// the text the server echoed back (its structuredContent echo.text).
func echoText(t *testing.T, ctx context.Context, cs *mcp.ClientSession, text string) string {
	t.Helper()
	got, err := echoCall(ctx, cs, text)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// echoCall is echoText for any goroutine: it returns what fails.
func echoCall(ctx context.Context, cs *mcp.ClientSession, text string) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		return "", fmt.Errorf("call echo: %w", err)
	}
	if len(res.Content) != 1 {
		return "", fmt.Errorf("call echo: %d content items", len(res.Content))
	}
	if _, ok := res.Content[0].(*mcp.TextContent); !ok {
		return "", fmt.Errorf("call echo: content %T", res.Content[0])
	}
	var sc struct {
		Echo struct {
			Text string `json:"text"`
		} `json:"echo"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &sc); err != nil {
		return "", fmt.Errorf("call echo: structuredContent %s: %w", b, err)
	}
	return sc.Echo.Text, nil
}

// assertGone fails unless no process pid exists (not even a zombie).
func assertGone(t *testing.T, what string, pid int) {
	t.Helper()
	if pid <= 0 {
		t.Fatalf("%s: no pid", what)
	}
	if e, ok := child.Lookup(pid); ok {
		t.Errorf("%s (pid %d) still exists in state %c", what, pid, e.State)
	}
}

func TestStdioSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var (
		mu       sync.Mutex
		methods  []string
		filtered int
	)
	pidFile := filepath.Join(t.TempDir(), "pid")
	opts := serverOptions(t, bridgetest.Mode{PidFile: pidFile, Stderr: []string{"test server ready"}})
	opts.OnOutgoing = func(msg jsonrpc.Message) {
		if r, ok := msg.(*jsonrpc.Request); ok {
			mu.Lock()
			methods = append(methods, r.Method)
			mu.Unlock()
		}
	}
	opts.FilterIncoming = func(raw []byte) []byte {
		mu.Lock()
		defer mu.Unlock()
		filtered++
		// Substitute a stub for the echo of "secret", as the relay does.
		if bytes.Contains(raw, []byte(`"secret"`)) {
			return bytes.Replace(raw, []byte(`"secret"`), []byte(`"stub"`), 1)
		}
		return raw
	}
	tr := NewTransport(opts)
	if tr.Pgid() != 0 {
		t.Fatalf("Pgid before start = %d", tr.Pgid())
	}
	cs := connectClient(t, ctx, tr)
	pgid, pid := tr.Pgid(), tr.Pid()
	if pgid <= 0 || pid <= 0 {
		t.Fatalf("pgid %d, pid %d", pgid, pid)
	}
	if got, err := readPid(pidFile); err != nil || got != pid {
		t.Errorf("the server says its pid is %d (%v), the transport says %d", got, err, pid)
	}
	checkServerGroup(t, pid, pgid)
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != builtinTools {
		t.Errorf("tools = %v, want %s", names, builtinTools)
	}
	if got := echoText(t, ctx, cs, "hello"); got != "hello" {
		t.Errorf("echo = %q", got)
	}
	if got := echoText(t, ctx, cs, "secret"); got != "stub" {
		t.Errorf("FilterIncoming's substitute was not decoded: echo = %q", got)
	}

	// Concurrent calls: writes are serialized, every answer reaches its call.
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Go(func() {
			want := fmt.Sprintf("call %d", i)
			got, err := echoCall(ctx, cs, want)
			if err != nil {
				errs <- err
				return
			}
			if got != want {
				errs <- fmt.Errorf("got %q, want %q", got, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	ee := tr.ExitError()
	if ee == nil || !ee.Stopped || ee.Status != 0 || ee.Signal != "" {
		t.Errorf("after Close: %#v", ee)
	}
	if got := ee.Error(); got != "lab-tools stopped" {
		t.Errorf("ExitError = %q", got)
	}
	assertGone(t, "server", pid)
	assertGone(t, "keeper", pgid)
	mu.Lock()
	defer mu.Unlock()
	if len(methods) < 4 || methods[0] != "initialize" || methods[1] != "notifications/initialized" {
		t.Errorf("OnOutgoing saw %v", methods)
	}
	if filtered < 36 {
		t.Errorf("FilterIncoming saw %d messages", filtered)
	}
	if tail := tr.StderrTail(); len(tail) == 0 || tail[len(tail)-1] != "test server ready" {
		t.Errorf("stderr tail = %q", tail)
	}
}

func TestStdioJunkOnStdout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var logs syncBuffer
	// Banners at start, and a log line after every message.
	opts := serverOptions(t, bridgetest.Mode{
		Banner: []string{"Starting lab-tools 1.2.3", "", "[1, 2, 3]", "{not json at all",
			`{"jsonrpc":"1.0","id":99,"result":{}}`, `{"jsonrpc":"2.0"}`, "\x1b[32mready\x1b[0m\r"},
		Junk: []string{"INFO handled a request"}, JunkEveryN: 1,
	})
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	tr := NewTransport(opts)
	cs := connectClient(t, ctx, tr)
	defer cs.Close()
	for i := range 3 {
		want := "hi " + strconv.Itoa(i)
		if got := echoText(t, ctx, cs, want); got != want {
			t.Errorf("echo = %q", got)
		}
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	for _, want := range []string{
		`level=WARN msg="skipping a line on the server's stdout that is not a JSON-RPC message" line="Starting lab-tools 1.2.3`,
		`line="[1, 2, 3]"`,
		`line="{not json at all"`,
		`line="INFO handled a request"`,
		`msg="skipping an invalid JSON-RPC message on the server's stdout" line="{\"jsonrpc\":\"1.0\"`,
		`line="{\"jsonrpc\":\"2.0\"}"`,
		`line=ready`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s\n%s", want, out)
		}
	}
}

func TestStdioTooLarge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The id comes after the payload: the transport learns which call an
	// oversized result answers only at its end.
	opts := serverOptions(t, bridgetest.Mode{IDLast: true})
	opts.MaxMessageBytes = 1 << 20
	var (
		mu         sync.Mutex
		passed     []int // sizes of the big results FilterIncoming saw
		passedPads []int // and the lengths of their padding
	)
	opts.FilterIncoming = func(raw []byte) []byte {
		if _, pad, ok := bytes.Cut(raw, []byte(`"padding":"`)); ok {
			mu.Lock()
			passed = append(passed, len(raw))
			passedPads = append(passedPads, bytes.IndexByte(pad, '"'))
			mu.Unlock()
		}
		return raw
	}
	tr := NewTransport(opts)
	cs := connectClient(t, ctx, tr)
	defer cs.Close()

	// big's response line (without its newline) is exactly bytes long.
	const lineSize = 20 << 20
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "big", Arguments: map[string]any{"bytes": lineSize}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != CodeTooLarge {
		t.Fatalf("big call: %v, want a JSON-RPC error %d", err, CodeTooLarge)
	}
	wantMsg := fmt.Sprintf("result of %d bytes exceeds the limit of %d bytes", lineSize, 1<<20)
	if werr.Message != wantMsg || string(werr.Data) != fmt.Sprintf(`{"limit":%d,"size":%d}`, 1<<20, lineSize) {
		t.Errorf("error = %q %s, want %q", werr.Message, werr.Data, wantMsg)
	}
	// Only that call failed.
	if got := echoText(t, ctx, cs, "after"); got != "after" {
		t.Errorf("echo after the oversized result = %q", got)
	}
	// Just under the limit passes, whole.
	const under = 1<<20 - 200
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "big", Arguments: map[string]any{"bytes": under}})
	if err != nil {
		t.Fatalf("a result under the limit: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(passed) != 1 || passed[0] != under {
		t.Fatalf("messages of %v bytes reached FilterIncoming, want the one of %d", passed, under)
	}
	padding, _ := res.StructuredContent.(map[string]any)["padding"].(string)
	if len(padding) != passedPads[0] || strings.Trim(padding, "x") != "" {
		t.Errorf("a result under the limit: %d bytes of padding decoded, the server sent %d", len(padding), passedPads[0])
	}
}

func TestStdioServerCrash(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tr := NewTransport(serverOptions(t, bridgetest.Mode{}))
	cs := connectClient(t, ctx, tr)
	defer cs.Close()
	pid := tr.Pid()

	callCtx, callCancel := context.WithTimeout(ctx, 10*time.Second)
	defer callCancel()
	_, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "crash"})
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("call: %v, want an *ExitError", err)
	}
	if ee.Status != 3 || ee.Signal != "" || ee.Stopped || ee.Name != "lab-tools" {
		t.Errorf("exit error %#v", ee)
	}
	if got, want := ee.Error(), "lab-tools exited with status 3: fatal: simulated crash"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	if werr := cs.Wait(); !errors.As(werr, &ee) {
		t.Errorf("session Wait = %v", werr)
	}
	childtest.WaitGone(t, "server", pid, false)
}

func TestStdioExitBeforeInitialize(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tr := NewTransport(serverOptions(t, bridgetest.Mode{Stderr: []string{"loading configuration"}, ExitBeforeInit: true}))
	client := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil)
	_, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("connect: %v, want an *ExitError", err)
	}
	if got, want := ee.Error(), "lab-tools exited with status 2: bridgetest: fatal: simulated failure before initialize"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	if len(ee.StderrTail) != 2 || ee.StderrTail[0] != "loading configuration" {
		t.Errorf("stderr tail = %q", ee.StderrTail)
	}
	assertGone(t, "keeper", tr.Pgid())
}

func TestStdioStubbornServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := serverOptions(t, bridgetest.Mode{IgnoreSIGTERM: true, LingerAfterEOF: true})
	opts.TerminateDuration = 200 * time.Millisecond
	opts.KillDuration = 300 * time.Millisecond
	tr := NewTransport(opts)
	cs := connectClient(t, ctx, tr)
	server := tr.Pid()
	if got := echoText(t, ctx, cs, "x"); got != "x" {
		t.Errorf("echo = %q", got)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	ee := tr.ExitError()
	if ee == nil || !stoppedBy(ee, "kill") {
		t.Errorf("exit = %#v, want stopped by the kill step", ee)
	}
	assertGone(t, "server", server) // reaped: no zombie
	assertGone(t, "keeper", tr.Pgid())
}

func TestStdioStderrFlood(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var (
		lines   int // owned by the stderr goroutine until Read returns the exit
		longest int
		first   int
	)
	// 200 MB without a newline, a million short lines, a last line, and
	// exit status 0.
	opts := serverOptions(t, bridgetest.Mode{StderrLongLine: 200 << 20, StderrFloodLines: 1_000_000,
		Stderr: []string{"flood done"}, ExitAfterStart: true})
	opts.StderrTailBytes = 4096
	opts.OnStderrLine = func(l string) {
		if lines == 0 {
			first = len(l)
		}
		lines++
		longest = max(longest, len(l))
	}
	tr := NewTransport(opts)
	conn, err := tr.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = conn.Read(ctx)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Status != 0 {
		t.Fatalf("read: %v, want exit status 0", err)
	}
	if got := ee.Error(); got != "lab-tools exited with status 0: flood done" {
		t.Errorf("error = %q", got)
	}
	if lines != 1_000_002 || first != stderrLineMax || longest != stderrLineMax {
		t.Errorf("OnStderrLine saw %d lines, the first %d bytes, the longest %d", lines, first, longest)
	}
	tail := tr.StderrTail()
	total := 0
	for _, l := range tail {
		total += len(l) + 1
	}
	if total > 4096 || len(tail) < 100 || tail[len(tail)-1] != "flood done" || tail[len(tail)-2] != "line 999999" {
		t.Errorf("tail: %d lines, %d bytes, ending %q", len(tail), total, tail[max(0, len(tail)-2):])
	}
}

func TestStdioConnectOnce(t *testing.T) {
	tr := NewTransport(serverOptions(t, bridgetest.Mode{}))
	conn, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Connect(context.Background()); err == nil {
		t.Error("a second Connect succeeded")
	}
	// Close is idempotent and safe concurrently with Read.
	readErr := make(chan error, 1)
	go func() {
		_, err := conn.Read(context.Background())
		readErr <- err
	}()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { _ = conn.Close() })
	}
	wg.Wait()
	if err := <-readErr; !errors.Is(err, io.EOF) {
		t.Errorf("Read after Close = %v, want EOF", err)
	}
	if err := conn.Write(context.Background(), &jsonrpc.Request{Method: "ping"}); err == nil {
		t.Error("Write after Close succeeded")
	}
	assertGone(t, "keeper", tr.Pgid())
}

// TestStdioCloseUnblocksWrite closes a connection while a Write is blocked
// on a server that never reads.
func TestStdioCloseUnblocksWrite(t *testing.T) {
	opts := serverOptions(t, bridgetest.Mode{Deaf: true})
	opts.TerminateDuration = 100 * time.Millisecond
	opts.KillDuration = 100 * time.Millisecond
	tr := NewTransport(opts)
	conn, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	id, _ := jsonrpc.MakeID(float64(1))
	req := &jsonrpc.Request{ID: id, Method: "tools/call", Params: []byte(`"` + strings.Repeat("w", 4<<20) + `"`)}
	writeErr := make(chan error, 1)
	go func() { writeErr <- conn.Write(context.Background(), req) }()
	select {
	case err := <-writeErr:
		t.Fatalf("a 4 MiB write to a server that never reads returned %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := conn.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if err := <-writeErr; err == nil {
		t.Error("the blocked Write succeeded")
	}
	if ee := tr.ExitError(); ee == nil || !stoppedBy(ee, "interrupt") {
		t.Errorf("exit = %#v, want stopped by the interrupt step", ee)
	}
}

// The context given to Connect bounds the start only.
func TestStdioConnectContextDoesNotLimitLife(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tr := NewTransport(serverOptions(t, bridgetest.Mode{}))
	cs := connectClient(t, ctx, tr)
	defer cs.Close()
	cancel()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	if got := echoText(t, ctx2, cs, "alive"); got != "alive" {
		t.Errorf("echo = %q", got)
	}
	if e, ok := child.Lookup(tr.Pid()); !ok || e.State == 'Z' {
		t.Error("the server did not outlive Connect's context")
	}
}

func TestStdioExitErrorMessages(t *testing.T) {
	for _, tc := range []struct {
		e    ExitError
		want string
	}{
		{ExitError{Name: "a", Status: 1, StderrTail: []string{"x", "last", "  "}}, "a exited with status 1: last"},
		{ExitError{Name: "a", Status: 1}, "a exited with status 1"},
		{ExitError{Name: "a", Status: -1, Signal: "SIGSEGV", StderrTail: []string{"boom"}}, "a was killed by signal SIGSEGV: boom"},
		{ExitError{Name: "a", Status: -1, Signal: "SIGKILL", Stopped: true}, "a stopped"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%#v: %q, want %q", tc.e, got, tc.want)
		}
	}
}

func TestStdioSanitizeLine(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                    "plain",
		"\x1b[31merror\x1b[0m: x":  "error: x",
		"a\tb\rc\x00d\x7f":         "a bcd",
		"bad \xff utf8":            "bad \uFFFD utf8",
		"caf\u00e9 \u2713":         "caf\u00e9 \u2713",
		"\x1b]0;title\x07visible":  "0;titlevisible",
		"trailing escape \x1b":     "trailing escape ",
		"c1 \u0085control \u009b ": "c1 control  ",
	} {
		if got := sanitizeLine([]byte(in)); got != want {
			t.Errorf("sanitizeLine(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestStdioDescendantsStopped closes a server that started one process in
// its group and one that left it: Close returns with none of them left.
func TestStdioDescendantsStopped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	opts := serverOptions(t, familyMode(dir))
	opts.TerminateDuration = 200 * time.Millisecond
	opts.KillDuration = 500 * time.Millisecond
	tr := NewTransport(opts)
	// The server writes its pid files before it reads anything: once it
	// has answered initialize, they are there.
	cs := connectClient(t, ctx, tr)
	pids, err := familyPids(dir)
	if err != nil {
		cs.Close()
		t.Fatal(err)
	}
	if pids[0] != tr.Pid() {
		t.Errorf("the server wrote pid %d, the transport says %d", pids[0], tr.Pid())
	}
	for i, what := range familyWhat {
		if !childtest.Running(pids[i]) {
			cs.Close()
			t.Fatalf("%s (%d) is not running before Close", what, pids[i])
		}
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	for i, what := range familyWhat {
		assertGone(t, what, pids[i])
	}
}
