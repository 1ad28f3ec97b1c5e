package bridge_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// TestCallsNeverWaitForTheCatalog: while the configuration is being read
// again and that read does not end (a jupyter_server_config.py that
// sleeps), calls to a connected server are answered: they are checked
// against the last configuration read, and the read goes on by itself.
// Before, each call past the recheck interval waited for the read (30 s
// with a sleeping .py).
func TestCallsNeverWaitForTheCatalog(t *testing.T) {
	spec := fakeServer(t, "lab", bridgetest.Mode{})
	var blocked atomic.Bool
	release := make(chan struct{})
	var reads atomic.Int32
	h := newHarness(t, bridge.Options{ConfigRecheck: 20 * time.Millisecond, Catalog: bridge.CatalogFunc(func(ctx context.Context) bridge.Snapshot {
		if blocked.Load() {
			reads.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return bridge.Snapshot{Servers: []bridge.ServerSpec{spec}}
	})}, spec)
	t.Cleanup(func() { close(release) })
	ctx := testCtx(t, 60*time.Second)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	blocked.Store(true)
	for i := range 5 {
		time.Sleep(30 * time.Millisecond) // past the recheck interval
		r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 10 + i, "server": "lab", "tool": "echo", "arguments": map[string]any{"i": i}})
		if err != nil {
			t.Fatal(err)
		}
		mustOK(t, r)
	}
	t.Logf("abuse: the configuration is read again and the read never ends (a jupyter_server_config.py that sleeps) | calls to a connected server never wait for it | 5 of 5 calls answered while the read hung")
	if n := reads.Load(); n != 1 {
		t.Errorf("the configuration was read %d times while a read was under way, want 1 (one refresh, shared)", n)
	}
}
