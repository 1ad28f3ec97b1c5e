package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// The lifecycle tests signal the program as a separate process (this test
// binary re-executed as the program: run() under main's signal handling),
// with a bridgetest tool server as its child, and check the outcome in
// /proc, not through the bridge's own bookkeeping.

// init serves a bridgetest tool server when this binary is started as one
// (before TestMain: a tool server needs nothing else).
// A grandchild a server spawns (Mode.SpawnDetached) is this binary too, and
// ServeFromEnv makes it sleep: without this it would inherit the program's
// marker and run the program instead.
func init() {
	if os.Getenv("MEGANE_BRIDGE_KEEPER") == "" && bridgetest.ServeFromEnv() {
		os.Exit(0)
	}
}

// bridgeProcess is the program running serve --standalone in a child,
// with slow-tools configured.
type bridgeProcess struct {
	*programProcess
	token  string
	marker string // in the tool server's environment
}

// startBridgeProcess starts the program; env is added to the environment it
// inherits from this test.
func startBridgeProcess(t *testing.T, env ...string) *bridgeProcess {
	t.Helper()
	return startBridgeProcessMode(t, bridgetest.Mode{Name: "slow-tools"}, env...)
}

// startBridgeProcessMode is startBridgeProcess with the tool server in
// mode (named slow-tools whatever mode.Name says).
func startBridgeProcessMode(t *testing.T, mode bridgetest.Mode, env ...string) *bridgeProcess {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var rb [6]byte
	rand.Read(rb[:])
	bp := &bridgeProcess{token: "lifecycle-token-0123456789", marker: "lifecycle-" + hex.EncodeToString(rb[:]),
		programProcess: &programProcess{stderr: &lockedBuffer{}, exited: make(chan struct{})}}
	mode.Name = "slow-tools"
	modeJSON, _ := json.Marshal(mode)
	servers, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"slow-tools": map[string]any{"command": exe, "args": []string{"-test.run=^$"},
			"env": map[string]string{bridgetest.EnvVar: string(modeJSON), "MEGANE_FAULT_MARK": bp.marker}},
	}})
	serversFile := filepath.Join(dir, "servers.json")
	ready := filepath.Join(dir, "ready")
	if err := os.WriteFile(serversFile, servers, 0o600); err != nil {
		t.Fatal(err)
	}
	bp.cmd = exec.Command(exe, "serve", "--standalone", "--port", "0", "--token", bp.token,
		"--servers", serversFile, "--ready-file", ready)
	bp.cmd.Env = append(os.Environ(), asProgramEnv+"=1",
		"HOME="+filepath.Join(dir, "home"), "JUPYTER_CONFIG_DIR="+filepath.Join(dir, "config"),
		"JUPYTER_DATA_DIR="+filepath.Join(dir, "data"), "JUPYTER_RUNTIME_DIR="+filepath.Join(dir, "runtime"),
		"JUPYTER_CONFIG_PATH=", "GORACE=atexit_sleep_ms=0")
	bp.cmd.Env = append(bp.cmd.Env, env...)
	child.InGroup(bp.cmd)
	launchProgram(t, bp.programProcess, ready)
	return bp
}

// connectPage connects a page to slow-tools, which starts its tool server.
func (bp *bridgeProcess) connectPage(t *testing.T, ctx context.Context) *bridgetest.Page {
	t.Helper()
	p, _, err := bridgetest.Dial(ctx, "ws://"+bp.addr+"/megane/builder-tools/ws?token="+bp.token, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	r, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": 1})
	if err != nil {
		t.Fatal(err)
	}
	var servers []struct{ Name, Fingerprint string }
	json.Unmarshal(r.Fields["servers"], &servers)
	if len(servers) != 1 {
		t.Fatalf("servers: %s", r)
	}
	r, err = p.Request(ctx, map[string]any{"type": "tools:connect", "id": 2, "server": "slow-tools",
		"fingerprint": servers[0].Fingerprint, "confirmed": true})
	if err != nil || r.OK == nil || !*r.OK {
		t.Fatalf("connect: %v %s\n%s", err, r, bp.stderr)
	}
	return p
}

// pageWithCall connects a page to slow-tools and starts a long call with
// progress; it returns once the call's first progress arrived.
func (bp *bridgeProcess) pageWithCall(t *testing.T, ctx context.Context) *bridgetest.Page {
	t.Helper()
	p := bp.connectPage(t, ctx)
	p.Send(map[string]any{"type": "tools:call", "id": 3, "server": "slow-tools", "tool": "slow",
		"arguments": map[string]any{"steps": 100000, "intervalMs": 20, "tag": "long"}})
	if _, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" }); err != nil {
		t.Fatal(err)
	}
	if len(markedProcs(bp.marker)) == 0 {
		t.Fatal("no tool server process found in /proc")
	}
	return p
}

// markedProcs lists the processes whose environment carries marker.
func markedProcs(marker string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if bytes.Contains(env, []byte("MEGANE_FAULT_MARK="+marker+"\x00")) {
			stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			found = append(found, fmt.Sprintf("%s %.60s", e.Name(), stat))
		}
	}
	return found
}

func waitNoneMarked(t *testing.T, marker string, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		left := markedProcs(marker)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tool server processes left %s after the bridge ended: %v", bound, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLifecycleSIGTERM: SIGTERM to the bridge with a call in flight. The
// call is answered, the page gets a close, the tool server is stopped, and
// the bridge exits with status 0 within 10 s.
func TestLifecycleSIGTERM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bp := startBridgeProcess(t)
	p := bp.pageWithCall(t, ctx)
	start := time.Now()
	if err := bp.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-bp.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the bridge did not exit within 10 s of SIGTERM\n%s", bp.stderr)
	}
	t.Logf("exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	if bp.err != nil {
		t.Errorf("exit after SIGTERM: %v (want status 0)\n%s", bp.err, bp.stderr)
	}
	<-p.Done()
	var answered *bridgetest.Msg
	for _, m := range p.All() {
		if m.Type == "tools:call" && string(m.ID) == "3" {
			answered = m
		}
	}
	if answered == nil || answered.Error == nil || answered.Error.Message == "" {
		t.Errorf("the call in flight was not answered before the bridge went away (socket: %v)", p.Err())
	} else {
		t.Logf("the call was answered %s: %s", answered.Error.Code, answered.Error.Message)
	}
	if ce := p.CloseError(); ce == nil || ce.Code != 1001 {
		t.Errorf("want close 1001 (going away), got %v", p.Err())
	}
	waitNoneMarked(t, bp.marker, 5*time.Second)
}

// TestLifecycleSIGKILL: SIGKILL to the bridge. No tool server process
// survives it (the keeper sees its lifeline close and kills the group).
func TestLifecycleSIGKILL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bp := startBridgeProcess(t)
	bp.pageWithCall(t, ctx)
	if err := bp.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-bp.exited
	waitNoneMarked(t, bp.marker, 10*time.Second)
}

// TestCredentialsNotInherited: the program runs with the credentials a
// single-user server inherits from JupyterHub and Jupyter in its
// environment (every name of the default strip list, with a value no other
// process has). Its tool server, started by a page's connect, must inherit
// the environment without them: neither the names nor the values are in
// /proc/<pid>/environ of the real tool server or of any other process the
// program started (the keeper), while an ordinary variable (a proxy
// setting the tool may need) is passed on. The program's log must not
// carry the values either.
func TestCredentialsNotInherited(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var rb [6]byte
	rand.Read(rb[:])
	run := hex.EncodeToString(rb[:])
	// The three a single-user server always has are named here as well as
	// through the list, so that a list that lost one of them fails too.
	// So are two that no list names and only the rule strips (issue 28).
	names := []string{"JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "JUPYTER_TOKEN",
		"JUPYTERHUB_OAUTH_ACCESS_TOKEN", "JUPYTER_SERVER_TOKEN"}
	for _, n := range jupyter.DefaultStripEnv() {
		if strings.Contains(n, "*") {
			n = strings.ReplaceAll(n, "*", "_TEST_")
		}
		names = append(names, n)
	}
	secrets := map[string]string{} // name -> value
	var env []string
	for _, n := range names {
		secrets[n] = "secret-" + strings.ToLower(n) + "-" + run
		env = append(env, n+"="+secrets[n])
	}
	proxy := "HTTPS_PROXY=http://proxy-" + run + ".example.invalid:3128"
	env = append(env, proxy)

	bp := startBridgeProcess(t, env...)
	bp.connectPage(t, ctx)
	servers := map[int]bool{}
	for _, pid := range markedPids(bp.marker) {
		servers[pid] = true
	}
	if len(servers) == 0 {
		t.Fatalf("no tool server process found in /proc\n%s", bp.stderr)
	}
	children := descendants(bp.cmd.Process.Pid)
	for pid := range servers {
		if !slices.Contains(children, pid) {
			t.Fatalf("tool server %d is not a descendant of the program %d (descendants %v)", pid, bp.cmd.Process.Pid, children)
		}
	}
	if len(children) < 2 {
		t.Fatalf("want the keeper and the tool server among the program's descendants, got %v", children)
	}
	for _, pid := range children {
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			t.Fatalf("read the environment of %d: %v", pid, err)
		}
		vars := strings.Split(string(environ), "\x00")
		for name, value := range secrets {
			for _, kv := range vars {
				if strings.HasPrefix(kv, name+"=") {
					t.Errorf("process %d (%s) has %s in its environment", pid, cmdlineOf(pid), name)
				}
				if strings.Contains(kv, value) {
					carrier, _, _ := strings.Cut(kv, "=")
					t.Errorf("process %d (%s) has the value of %s in its environment, in %s", pid, cmdlineOf(pid), name, carrier)
				}
			}
		}
		if servers[pid] && !slices.Contains(vars, proxy) {
			t.Errorf("tool server %d did not inherit %s: the bridge must pass on everything but credentials", pid, proxy)
		}
	}
	for name, value := range secrets {
		if strings.Contains(bp.stderr.String(), value) {
			t.Errorf("the program's log carries the value of %s", name)
		}
	}
}

// markedPids lists the processes whose environment carries marker.
func markedPids(marker string) []int {
	var pids []int
	for _, line := range markedProcs(marker) {
		pid, err := strconv.Atoi(strings.Fields(line)[0])
		if err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// descendants lists the live processes below pid in the process tree, from
// the parent pids in /proc.
func descendants(pid int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, pp, ok := bridgetest.ProcStat(p); ok && state != "Z" {
			parent[p] = pp
		}
	}
	var out []int
	for p := range parent {
		for a, n := parent[p], 0; a > 1 && n < 64; a, n = parent[a], n+1 {
			if a == pid {
				out = append(out, p)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

func cmdlineOf(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}
