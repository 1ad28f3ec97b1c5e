package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// lockedBuffer collects a program's output.
type lockedBuffer = bridgetest.Buffer

// demoServersFile writes a servers file whose demo-tools entry is this test
// binary acting as the program.
func demoServersFile(t *testing.T, extra map[string]any) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	servers := map[string]any{
		"demo-tools": map[string]any{"command": exe, "args": []string{"demo-tools"},
			"env": map[string]string{asProgramEnv: "1"}},
	}
	for k, v := range extra {
		servers[k] = v
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": servers})
	path := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// running is the real program started by run() in this process.
type running struct {
	addr   string
	stdout *lockedBuffer
	stderr *lockedBuffer
	stop   func() error
}

func startServe(t *testing.T, args ...string) *running {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{stdout: &lockedBuffer{}, stderr: &lockedBuffer{}}
	done := make(chan error, 1)
	full := append([]string{"serve", "--port", "0", "--ready-file", ready}, args...)
	go func() { done <- run(ctx, full, strings.NewReader(""), r.stdout, r.stderr) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(ready)
		if err == nil && len(b) > 0 {
			r.addr = strings.TrimSpace(string(b))
			break
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("serve exited before it was ready: %v\n%s", err, r.stderr)
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve did not get ready\n%s", r.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var once sync.Once
	var stopErr error
	r.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(15 * time.Second):
				stopErr = fmt.Errorf("serve did not stop within 15 s")
			}
		})
		return stopErr
	}
	t.Cleanup(func() { r.stop() })
	return r
}

func TestServeStandaloneEndToEnd(t *testing.T) {
	const token = "test-token-0123456789"
	r := startServe(t, "--standalone", "--token", token, "--servers", demoServersFile(t, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if !strings.Contains(r.stdout.String(), "?token="+token) {
		t.Fatalf("serve must print a ready-to-open URL with the token:\n%s", r.stdout)
	}
	// jupyter-server-proxy's readiness probe: GET / without credentials.
	resp, err := http.Get("http://" + r.addr + "/")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /: %v %v", err, resp)
	}
	resp.Body.Close()

	for _, path := range []string{"/megane/builder-tools/ws", "/builder-tools/ws"} {
		p, _, err := bridgetest.Dial(ctx, "ws://"+r.addr+path+"?token="+token, nil)
		if err != nil {
			t.Fatalf("dial %s: %v", path, err)
		}
		m, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": 1})
		if err != nil || !strings.Contains(string(m.Fields["servers"]), `"demo-tools"`) {
			t.Fatalf("%s: servers: %v %v", path, err, m)
		}
		p.Close()
	}

	p, _, err := bridgetest.Dial(ctx, "ws://"+r.addr+"/megane/builder-tools/ws?token="+token, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m, _ := p.Request(ctx, map[string]any{"type": "tools:servers", "id": 1})
	var servers []struct{ Name, Fingerprint, CommandLine string }
	json.Unmarshal(m.Fields["servers"], &servers)
	if len(servers) != 1 || servers[0].Fingerprint == "" || !strings.Contains(servers[0].CommandLine, "demo-tools") {
		t.Fatalf("servers: %s", m.Fields["servers"])
	}
	c, _ := p.Request(ctx, map[string]any{"type": "tools:connect", "id": 2, "server": "demo-tools", "fingerprint": servers[0].Fingerprint, "confirmed": true})
	if c.OK == nil || !*c.OK {
		t.Fatalf("connect: %s\n%s", c, r.stderr)
	}
	for _, tool := range []string{`"gas_box"`, `"crystal"`, `"io.github.megane-labs/builder"`} {
		if !strings.Contains(string(c.Fields["tools"]), tool) {
			t.Fatalf("listing lacks %s", tool)
		}
	}
	call, _ := p.Request(ctx, map[string]any{"type": "tools:call", "id": 3, "server": "demo-tools", "tool": "gas_box",
		"arguments": map[string]any{"element": 18, "count": 200, "seed": 7}})
	if call.OK == nil || !*call.OK {
		t.Fatalf("gas_box: %s", call)
	}
	var res struct {
		StructuredContent struct {
			Contract  int
			Structure struct {
				Elements  []int
				Positions []float64
				Cell      []float64
			}
		} `json:"structuredContent"`
	}
	json.Unmarshal(call.Fields["result"], &res)
	st := res.StructuredContent.Structure
	if res.StructuredContent.Contract != 1 || len(st.Elements) != 200 || len(st.Positions) != 600 || len(st.Cell) != 9 {
		t.Fatalf("gas_box result: %.300s", call.Fields["result"])
	}
	progress := 0
	for _, msg := range p.All() {
		if msg.Type == "tools:progress" && string(msg.ID) == "3" {
			progress++
		}
	}
	if progress == 0 {
		t.Fatalf("gas_box sent no progress through the bridge")
	}

	// Shutdown: run returns nil within the bound, and the tab is told.
	if err := r.stop(); err != nil {
		t.Fatalf("serve: %v\n%s", err, r.stderr)
	}
	<-p.Done()
	if ce := p.CloseError(); ce == nil || ce.Code != bridge.CloseGoingAway {
		t.Fatalf("the tab must be closed with 1001 at shutdown, got %v", p.Err())
	}
}

func TestServeStandaloneRefusals(t *testing.T) {
	const token = "test-token-abcdef"
	r := startServe(t, "--standalone", "--token", token, "--servers", demoServersFile(t, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws := "ws://" + r.addr + "/megane/builder-tools/ws"
	cases := []struct {
		name     string
		url      string
		header   http.Header
		status   int // HTTP refusal
		code     int // close code after the upgrade
		admitted bool
	}{
		{"token in the query", ws + "?token=" + token, nil, 0, 0, true},
		{"token in the header", ws, http.Header{"Authorization": {"token " + token}}, 0, 0, true},
		{"no token", ws, nil, 0, bridge.CloseNoCredentials, false},
		{"wrong token", ws + "?token=nope", nil, 0, bridge.CloseNoCredentials, false},
		{"foreign origin", ws + "?token=" + token, http.Header{"Origin": {"https://evil.example"}}, 403, 0, false},
		{"same origin", ws + "?token=" + token, http.Header{"Origin": {"http://" + r.addr}}, 0, 0, true},
		{"rebinding host", ws + "?token=" + token, http.Header{"Host": {"evil.example"}}, 403, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, resp, err := bridgetest.Dial(ctx, tc.url, tc.header)
			if tc.status != 0 {
				if err == nil || resp == nil || resp.StatusCode != tc.status {
					t.Fatalf("want HTTP %d, got %v %v", tc.status, err, resp)
				}
				body, _ := io.ReadAll(resp.Body)
				if len(bytes.TrimSpace(body)) == 0 {
					t.Fatalf("an HTTP refusal must say why")
				}
				return
			}
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer p.Close()
			m, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": 1})
			if tc.admitted {
				if err != nil || m.OK == nil || !*m.OK {
					t.Fatalf("want admitted: %v %v", err, m)
				}
				return
			}
			if err == nil {
				t.Fatalf("want refused, got %s", m)
			}
			ce := p.CloseError()
			if ce == nil || ce.Code != tc.code || ce.Text == "" {
				t.Fatalf("want close %d with a reason, got %v", tc.code, p.Err())
			}
			// The code and reason also come as a message, which survives
			// jupyter-server-proxy (it replaces close codes).
			var closing *bridgetest.Msg
			for _, m := range p.All() {
				if m.Type == "tools:closing" {
					closing = m
				}
			}
			if closing == nil || string(closing.Fields["code"]) != fmt.Sprint(tc.code) || closing.Str("reason") == "" {
				t.Fatalf("want a tools:closing message with code %d, got %v", tc.code, closing)
			}
		})
	}
	if strings.Contains(r.stderr.String(), token) {
		t.Fatalf("the token appears in the log")
	}
}

func TestServeBaseURLAndUnixSocket(t *testing.T) {
	const token = "tok-0123456789abcdef"
	dir, err := os.MkdirTemp("", "mjb")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s")
	r := startServe(t, "--standalone", "--token", token, "--servers", demoServersFile(t, nil), "--base-url", "/user/alice/", "--unix-socket", sock)
	if r.addr != sock {
		t.Fatalf("ready file says %q", r.addr)
	}
	st, err := os.Stat(sock)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("unix socket must be private: %v %v", err, st)
	}
}

// TestServeConfigEditWithoutRestart: editing the servers file while the
// bridge runs changes the next tools:servers, and the changed entry has a
// new fingerprint, so a page's old confirmation no longer connects it.
func TestServeConfigEditWithoutRestart(t *testing.T) {
	const token = "edit-token-0123456789"
	file := demoServersFile(t, nil)
	r := startServe(t, "--standalone", "--token", token, "--servers", file)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, _, err := bridgetest.Dial(ctx, "ws://"+r.addr+"/megane/builder-tools/ws?token="+token, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fingerprints := func(id int) map[string]string {
		m, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": id})
		if err != nil {
			t.Fatal(err)
		}
		var servers []struct{ Name, Fingerprint string }
		json.Unmarshal(m.Fields["servers"], &servers)
		out := map[string]string{}
		for _, s := range servers {
			out[s.Name] = s.Fingerprint
		}
		return out
	}
	before := fingerprints(1)
	exe, _ := os.Executable()
	edited, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"demo-tools": map[string]any{"command": exe, "args": []string{"demo-tools"},
			"env": map[string]string{asProgramEnv: "1", "OMP_NUM_THREADS": "2"}},
		"second": map[string]any{"command": exe, "args": []string{"demo-tools"}, "env": map[string]string{asProgramEnv: "1"}},
	}})
	time.Sleep(10 * time.Millisecond) // a new modification time
	if err := os.WriteFile(file, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	after := fingerprints(2)
	if after["second"] == "" {
		t.Fatalf("the added server is not listed: %v", after)
	}
	if after["demo-tools"] == "" || after["demo-tools"] == before["demo-tools"] {
		t.Fatalf("the changed entry must get a new fingerprint: before %v, after %v", before, after)
	}
	c, _ := p.Request(ctx, map[string]any{"type": "tools:connect", "id": 3, "server": "demo-tools", "fingerprint": before["demo-tools"], "confirmed": true})
	if c.Error == nil || c.Error.Code != bridge.CodeFingerprintChanged {
		t.Fatalf("connect with the old fingerprint: %s", c)
	}
}

// runProgram runs this test binary as the program (main's exit path) with
// args, in a private HOME and Jupyter directories plus env, and returns
// what it printed on stderr and its exit status.
func runProgram(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(exe, args...)
	cmd.Env = []string{asProgramEnv + "=1", "PATH=/usr/bin:/bin", "GORACE=atexit_sleep_ms=0",
		"HOME=" + filepath.Join(dir, "home"), "JUPYTER_CONFIG_DIR=" + filepath.Join(dir, "config"),
		"JUPYTER_DATA_DIR=" + filepath.Join(dir, "data"), "JUPYTER_RUNTIME_DIR=" + filepath.Join(dir, "runtime")}
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() { <-ctx.Done(); cmd.Process.Kill() }()
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return stderr.String(), 0
	case errors.As(err, &ee) && ee.Exited():
		return stderr.String(), ee.ExitCode()
	}
	t.Fatalf("%v: %v\n%s", args, err, stderr.String())
	return "", 0
}

// TestServeAllowOriginOnceWithJupyter: with Jupyter, --allow-origin is the
// server's single ServerApp.allow_origin; a second one used to be dropped
// without a word. Now the person is told, before anything starts, how to
// allow several (--allow-origin-pat).
func TestServeAllowOriginOnceWithJupyter(t *testing.T) {
	stderr, code := runProgram(t, nil, "serve", "--jupyter-url", "http://127.0.0.1:1/",
		"--allow-origin", "http://app.example", "--allow-origin", "http://lab.example")
	want := `megane-jupyter-bridge: --allow-origin is given 2 times, but with Jupyter it stands for the server's ServerApp.allow_origin, one Origin or "*": give it once, or give --allow-origin-pat a regular expression that matches them all (as the server's ServerApp.allow_origin_pat must)` + "\n"
	if code != 2 || stderr != want {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and:\n%s", code, stderr, want)
	}
	stderr, code = runProgram(t, nil, "serve", "--jupyter-url", "http://127.0.0.1:1/", "--allow-origin-pat", "http://(app|lab")
	if code != 2 || !strings.HasPrefix(stderr, "megane-jupyter-bridge: --allow-origin-pat: error parsing regexp: missing closing ): ") {
		t.Errorf("a pattern that does not compile: exit %d, stderr:\n%s", code, stderr)
	}
	// Standalone-only flags are refused with Jupyter, not ignored.
	for _, tc := range []struct{ flag, value, want string }{
		{"--allow-host", "lab.example", "megane-jupyter-bridge: --allow-host is for --standalone: with Jupyter, the Jupyter server checks the Host (ServerApp.allow_remote_access, ServerApp.local_hostnames)\n"},
		{"--token", "tok-0123456789abcdef", "megane-jupyter-bridge: --token is for --standalone: with Jupyter, pages connect with Jupyter's own credentials\n"},
	} {
		stderr, code = runProgram(t, nil, "serve", "--jupyter-url", "http://127.0.0.1:1/", tc.flag, tc.value)
		if code != 2 || stderr != tc.want {
			t.Errorf("%s with Jupyter: exit %d, stderr:\n%s\nwant exit 2 and:\n%s", tc.flag, code, stderr, tc.want)
		}
	}
	// Standalone takes several, each exactly.
	r := startServe(t, "--standalone", "--token", "tok-0123456789abcdef", "--servers", demoServersFile(t, nil),
		"--allow-origin", "http://app.example", "--allow-origin", "http://lab.example")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, origin := range []string{"http://app.example", "http://lab.example"} {
		p, _, err := bridgetest.Dial(ctx, "ws://"+r.addr+"/megane/builder-tools/ws?token=tok-0123456789abcdef", http.Header{"Origin": {origin}})
		if err != nil {
			t.Fatalf("standalone, Origin %s: %v", origin, err)
		}
		p.Close()
	}
}

// TestServeNoParentMessage: serve started by hand, with no Jupyter server
// above it, says so in one line that names where it looked and what to do,
// once (the advice used to come twice, in two wordings).
func TestServeNoParentMessage(t *testing.T) {
	runtime := filepath.Join(t.TempDir(), "runtime")
	stderr, code := runProgram(t, []string{"JUPYTER_RUNTIME_DIR=" + runtime}, "serve", "--port", "0")
	want := fmt.Sprintf("megane-jupyter-bridge: no parent Jupyter server found (no %s/jpserver-%d.json and no JUPYTERHUB_SERVICE_URL): "+
		"start the bridge through jupyter-server-proxy (megane-jupyter-bridge install), pass --jupyter-url, or run it with --standalone\n", runtime, os.Getpid())
	if code != 1 || stderr != want {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and:\n%s", code, stderr, want)
	}
}
