package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
)

// TestServerKillsItsKeeper (issue 28.4): a tool server double-forks a
// daemon into a session of its own, then SIGKILLs its keeper, which needs
// no privilege. Without the keeper nothing kills the daemon's session, and
// it used to live on under init after the bridge itself was SIGKILLed. The
// bridge is a child subreaper, so the daemon comes to it and is killed
// within reaperBound, while the bridge runs.
func TestServerKillsItsKeeper(t *testing.T) {
	const reaperBound = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pidFile := filepath.Join(t.TempDir(), "detached.pid")
	bp := startBridgeProcessMode(t, bridgetest.Mode{SpawnDetached: true, DetachedPidFile: pidFile, KillParent: true})
	p, _, err := bridgetest.Dial(ctx, "ws://"+bp.addr+"/megane/builder-tools/ws?token="+bp.token, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": 1})
	if err != nil {
		t.Fatal(err)
	}
	var servers []struct{ Name, Fingerprint string }
	json.Unmarshal(r.Fields["servers"], &servers)
	if len(servers) != 1 {
		t.Fatalf("servers: %s", r)
	}
	// The connect fails: the server dies with its keeper.
	r, err = p.Request(ctx, map[string]any{"type": "tools:connect", "id": 2, "server": "slow-tools",
		"fingerprint": servers[0].Fingerprint, "confirmed": true})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var pid int
	for pid == 0 {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if pid == 0 && time.Since(start) > 10*time.Second {
			t.Fatalf("the server never wrote its daemon's pid; connect: %s\n%s", r, bp.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(func() { killPid(pid) })
	for child.Alive(pid) {
		if time.Since(start) > reaperBound {
			info, _ := child.Lookup(pid)
			t.Fatalf("the daemon %d (parent %d) outlived its killed keeper by %s\n%s", pid, info.PPID, reaperBound, bp.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	gone := time.Since(start)
	if !strings.Contains(bp.stderr.String(), "killed a process a tool server left behind") {
		t.Errorf("the bridge did not say it killed the daemon:\n%s", bp.stderr)
	}
	t.Logf("abuse: server SIGKILLs its keeper after forking a daemon into its own session | daemon killed by the bridge (subreaper) within %s | gone and reaped %s after the connect was answered", reaperBound, gone.Round(time.Millisecond))
}
