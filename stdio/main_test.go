package stdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/child"
	"github.com/megane-labs/megane-jupyter-bridge/child/childtest"
)

// The test binary doubles as the tool servers the stdio tests run: TestMain
// turns it into a keeper (child.RunKeeperIfRequested) or into a test server
// (MEGANE_TEST_SERVER=<mode>) before any test runs.
const (
	testServerEnv   = "MEGANE_TEST_SERVER"
	testJunkEnv     = "MEGANE_TEST_JUNK"     // the mcp server writes banners and junk lines on stdout
	testStubbornEnv = "MEGANE_TEST_STUBBORN" // the mcp server ignores SIGTERM and stdin EOF
	testPidFileEnv  = "MEGANE_TEST_PIDFILE"  // where spawner writes its pids
)

func TestMain(m *testing.M) {
	child.RunKeeperIfRequested()
	if mode := os.Getenv(testServerEnv); mode != "" {
		os.Exit(runTestServer(mode))
	}
	childtest.VerifyTestMain(m)
}

func runTestServer(mode string) int {
	switch mode {
	case "mcp":
		return serveTestMCP()
	case "exit-early":
		fmt.Fprintln(os.Stderr, "loading configuration")
		fmt.Fprintln(os.Stderr, "fatal: config file /nope/lab.toml not found")
		return 2
	case "stderr-flood":
		return stderrFlood()
	case "deaf", "sleep": // never reads stdin
		for {
			time.Sleep(time.Hour)
		}
	case "spawner":
		return spawner()
	case "owner":
		return owner()
	}
	fmt.Fprintf(os.Stderr, "unknown test server mode %q\n", mode)
	return 2
}

// serveTestMCP is a minimal hand-written line-based MCP server.
func serveTestMCP() int {
	junk := os.Getenv(testJunkEnv) != ""
	stubborn := os.Getenv(testStubbornEnv) != ""
	if stubborn {
		signal.Ignore(syscall.SIGTERM, os.Interrupt)
	}
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	if junk {
		out.WriteString("Starting lab-tools 1.2.3 (pid " + strconv.Itoa(os.Getpid()) + ")\n\n")
		out.WriteString("[1, 2, 3]\n{not json at all\n")
		out.WriteString(`{"jsonrpc":"1.0","id":99,"result":{}}` + "\n")
		out.WriteString(`{"jsonrpc":"2.0"}` + "\n")
		out.WriteString("\x1b[32mready\x1b[0m\r\n")
		out.Flush()
	}
	fmt.Fprintln(os.Stderr, "test server ready")
	write := func(id json.RawMessage, result any) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
		out.Write(b)
		out.WriteByte('\n')
		if junk {
			out.WriteString("INFO handled a request\n")
		}
		out.Flush()
	}
	text := func(s string) any {
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}}
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<16), 64<<20)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil || len(req.ID) == 0 {
			continue // notifications
		}
		switch req.Method {
		case "initialize":
			var p struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			_ = json.Unmarshal(req.Params, &p)
			write(req.ID, map[string]any{
				"protocolVersion": p.ProtocolVersion,
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "test-server", "version": "1.0.0"},
			})
		case "ping":
			write(req.ID, map[string]any{})
		case "tools/list":
			var tools []any
			for _, n := range []string{"echo", "big", "crash", "pid"} {
				tools = append(tools, map[string]any{"name": n, "inputSchema": map[string]any{"type": "object"}})
			}
			write(req.ID, map[string]any{"tools": tools})
		case "tools/call":
			var p struct {
				Name      string `json:"name"`
				Arguments struct {
					Text string `json:"text"`
					Size int    `json:"size"`
				} `json:"arguments"`
			}
			_ = json.Unmarshal(req.Params, &p)
			switch p.Name {
			case "echo":
				write(req.ID, text(p.Arguments.Text))
			case "pid":
				write(req.ID, text(strconv.Itoa(os.Getpid())))
			case "big":
				// {"jsonrpc":"2.0","result":{...big...},"id":N}: the id comes last.
				out.WriteString(`{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"`)
				chunk := bytes.Repeat([]byte("x"), 1<<20)
				for n := p.Arguments.Size; n > 0; n -= len(chunk) {
					out.Write(chunk[:min(n, len(chunk))])
				}
				out.WriteString(`"}]},"id":` + string(req.ID) + "}\n")
				out.Flush()
			case "crash":
				out.Flush()
				fmt.Fprintln(os.Stderr, "Traceback (most recent call last):")
				fmt.Fprintln(os.Stderr, "fatal: the tool crashed on purpose")
				os.Exit(3)
			}
		default:
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID,
				"error": map[string]any{"code": -32601, "message": "method not found"}})
			out.Write(append(b, '\n'))
			out.Flush()
		}
	}
	if stubborn {
		for {
			time.Sleep(time.Hour)
		}
	}
	return 0
}

// stderrFlood writes 200 MB without a newline, then a million short lines.
func stderrFlood() int {
	w := bufio.NewWriterSize(os.Stderr, 1<<20)
	chunk := bytes.Repeat([]byte("e"), 1<<20)
	for i := 0; i < 200; i++ {
		w.Write(chunk)
	}
	w.WriteString("\n")
	for i := 0; i < 1_000_000; i++ {
		w.WriteString("line ")
		w.WriteString(strconv.Itoa(i))
		w.WriteByte('\n')
	}
	w.WriteString("flood done\n")
	w.Flush()
	return 0
}

// spawner starts two sleepers (this binary in mode "sleep"): one in its
// process group and one that leaves it (detach: a session of its own; on
// Windows a new process group without a console), writes
// "<own pid> <sleeper> <sleeper>" to the pid file, and waits forever.
func spawner() int {
	exe, err := os.Executable()
	if err != nil {
		return 1
	}
	a := exec.Command(exe, "-test.run=^$")
	a.Env = append(os.Environ(), testServerEnv+"=sleep")
	b := exec.Command(exe, "-test.run=^$")
	b.Env = a.Env
	detach(b)
	if err := a.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := b.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pf := os.Getenv(testPidFileEnv)
	data := fmt.Sprintf("%d %d %d\n", os.Getpid(), a.Process.Pid, b.Process.Pid)
	if err := os.WriteFile(pf+".tmp", []byte(data), 0o600); err != nil {
		return 1
	}
	if err := os.Rename(pf+".tmp", pf); err != nil {
		return 1
	}
	for {
		time.Sleep(time.Hour)
	}
}

// owner owns a transport running spawner, prints "ready <pgid>" once the
// spawner's pids are written, and waits to be killed.
func owner() int {
	exe, err := os.Executable()
	if err != nil {
		return 1
	}
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, testServerEnv+"=") {
			env = append(env, kv)
		}
	}
	tr := NewTransport(Options{
		Name: "spawner", Command: exe, Args: []string{"-test.run=^$"},
		Env: append(env, testServerEnv+"=spawner"),
	})
	if _, err := tr.Connect(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pf := os.Getenv(testPidFileEnv)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(pf); err == nil {
			fmt.Printf("ready %d\n", tr.Pgid())
			for {
				time.Sleep(time.Hour)
			}
		}
	}
	fmt.Fprintln(os.Stderr, "the spawner wrote no pid file")
	return 1
}
