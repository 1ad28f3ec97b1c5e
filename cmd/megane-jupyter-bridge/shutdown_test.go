package main

// Shutdown with a tool server that will not stop: it ignores SIGTERM and
// its stdin closing, so only SIGKILL ends it. run must wait until the
// bridge has killed it (nothing run started outlives run), and the program
// must still exit within its bound, with the server killed.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
)

const stuckToken = "stuck-token-0123456789"

// stuckServersFile writes a servers file whose one server, "stuck", is a
// shell script that ignores SIGTERM and never answers; its processes carry
// MEGANE_FAULT_MARK=<marker> in their environment (see markedProcs).
func stuckServersFile(t *testing.T) (path, marker string) {
	t.Helper()
	dir := t.TempDir()
	var rb [6]byte
	rand.Read(rb[:])
	marker = hex.EncodeToString(rb[:])
	script := filepath.Join(dir, "stuck.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntrap '' TERM\nwhile :; do sleep 1; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"stuck": map[string]any{"command": script, "env": map[string]string{"MEGANE_FAULT_MARK": marker}},
	}})
	path = filepath.Join(dir, "servers.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, marker
}

// connectStuck opens a page on the bridge at addr and asks it to connect to
// the stuck server (which never answers initialize); it returns once the
// server's process runs.
func connectStuck(t *testing.T, addr, marker string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, _, err := bridgetest.Dial(ctx, "ws://"+addr+"/megane/builder-tools/ws?token="+stuckToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	m, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": 1})
	if err != nil {
		t.Fatal(err)
	}
	var servers []struct{ Name, Fingerprint string }
	json.Unmarshal(m.Fields["servers"], &servers)
	if len(servers) != 1 {
		t.Fatalf("servers: %s", m)
	}
	p.Send(map[string]any{"type": "tools:connect", "id": 2, "server": "stuck", "fingerprint": servers[0].Fingerprint, "confirmed": true})
	for len(markedProcs(marker)) == 0 {
		if ctx.Err() != nil {
			t.Fatal("the stuck server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeWaitsForStuckServer: run returns only once the bridge has
// stopped the server that ignores SIGTERM (with SIGKILL to its group): no
// process and no goroutine of run is left when it returns.
func TestServeWaitsForStuckServer(t *testing.T) {
	file, marker := stuckServersFile(t)
	r := startServe(t, "--standalone", "--token", stuckToken, "--servers", file)
	connectStuck(t, r.addr, marker)
	start := time.Now()
	if err := r.stop(); err != nil {
		t.Fatalf("serve: %v\n%s", err, r.stderr)
	}
	t.Logf("run returned %s after its context ended", time.Since(start).Round(time.Millisecond))
	if left := markedProcs(marker); len(left) > 0 {
		t.Errorf("run returned while the stuck server still runs (pids %v)", left)
	}
}

// programProcess is the program running serve in a child process.
type programProcess struct {
	cmd    *exec.Cmd
	addr   string
	stderr *lockedBuffer
	exited chan struct{} // closed once cmd.Wait returned
	err    error         // cmd.Wait's result, set before exited is closed
}

func startProgram(t *testing.T, env []string, args ...string) *programProcess {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	pp := &programProcess{stderr: &lockedBuffer{}, exited: make(chan struct{})}
	pp.cmd = exec.Command(exe, append([]string{"serve", "--port", "0", "--ready-file", ready}, args...)...)
	pp.cmd.Env = append([]string{asProgramEnv + "=1", "PATH=/usr/bin:/bin", "GORACE=atexit_sleep_ms=0",
		"HOME=" + filepath.Join(dir, "home"), "JUPYTER_CONFIG_DIR=" + filepath.Join(dir, "config"),
		"JUPYTER_DATA_DIR=" + filepath.Join(dir, "data"), "JUPYTER_RUNTIME_DIR=" + filepath.Join(dir, "runtime"),
		"JUPYTER_CONFIG_PATH="}, env...)
	return launchProgram(t, pp, ready)
}

// launchProgram starts pp.cmd (the test binary as the program, serve with
// --ready-file ready), kills it (its process group, if it has one of its
// own) when the test ends, and waits until it is ready.
func launchProgram(t *testing.T, pp *programProcess, ready string) *programProcess {
	t.Helper()
	pp.cmd.Stderr = pp.stderr
	if err := pp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { pp.err = pp.cmd.Wait(); close(pp.exited) }()
	t.Cleanup(func() {
		if pp.cmd.SysProcAttr != nil { // child.InGroup
			child.KillGroup(pp.cmd.Process)
		} else {
			pp.cmd.Process.Kill()
		}
		<-pp.exited
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			pp.addr = strings.TrimSpace(string(b))
			return pp
		}
		select {
		case <-pp.exited:
			t.Fatalf("the program exited before it was ready: %v\n%s", pp.err, pp.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the program did not get ready\n%s", pp.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitExit waits up to bound for the program to exit and returns its exit
// status.
func (pp *programProcess) waitExit(t *testing.T, bound time.Duration) int {
	t.Helper()
	select {
	case <-pp.exited:
	case <-time.After(bound):
		t.Fatalf("the program did not exit within %s\n%s", bound, pp.stderr)
	}
	if pp.err == nil {
		return 0
	}
	if ee, ok := pp.err.(*exec.ExitError); ok && ee.Exited() {
		return ee.ExitCode()
	}
	t.Fatalf("the program ended by %v\n%s", pp.err, pp.stderr)
	return 0
}

// TestProgramExitBound: when stopping takes longer than the program's bound
// after SIGTERM, or a second signal comes, the program exits at once with
// status 1 and says so, and the stuck server does not survive it (its keeper
// SIGKILLs its group).
func TestProgramExitBound(t *testing.T) {
	t.Run("bound", func(t *testing.T) {
		file, marker := stuckServersFile(t)
		pp := startProgram(t, []string{exitBoundEnv + "=1s"}, "--standalone", "--token", stuckToken, "--servers", file)
		connectStuck(t, pp.addr, marker)
		start := time.Now()
		pp.cmd.Process.Signal(syscall.SIGTERM)
		// The bridge's own stop steps for this server take over 5 s.
		if code := pp.waitExit(t, 4*time.Second); code != 1 {
			t.Errorf("exit status %d, want 1", code)
		}
		t.Logf("exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
		if !strings.Contains(pp.stderr.String(), "megane-jupyter-bridge: did not stop within 1s of the signal: exiting now; the tool servers still stopping are killed\n") {
			t.Errorf("the program did not say why it exited:\n%s", pp.stderr)
		}
		waitNoneMarked(t, marker, 5*time.Second)
	})
	t.Run("second signal", func(t *testing.T) {
		file, marker := stuckServersFile(t)
		pp := startProgram(t, nil, "--standalone", "--token", stuckToken, "--servers", file)
		connectStuck(t, pp.addr, marker)
		pp.cmd.Process.Signal(syscall.SIGTERM)
		time.Sleep(300 * time.Millisecond)
		pp.cmd.Process.Signal(syscall.SIGTERM)
		if code := pp.waitExit(t, 2*time.Second); code != 1 {
			t.Errorf("exit status %d, want 1", code)
		}
		if !strings.Contains(pp.stderr.String(), "megane-jupyter-bridge: signalled again while stopping: exiting now; the tool servers still stopping are killed\n") {
			t.Errorf("the program did not say why it exited:\n%s", pp.stderr)
		}
		waitNoneMarked(t, marker, 5*time.Second)
	})
}
