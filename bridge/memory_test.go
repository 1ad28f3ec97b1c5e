package bridge_test

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// heldBytes is what the bridge's gauge reads: the runtime's mapped memory
// not handed back to the system.
func heldBytes() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}

// TestMemoryCeilingRefusesNewWork: near Options.MemoryLimit new connects,
// calls and chunk sequences are answered busy with a reason naming the
// ceiling, the socket stays open, and once memory is back under it the same
// page works again. The bridge never dies of it.
func TestMemoryCeilingRefusesNewWork(t *testing.T) {
	spec := fakeServer(t, "fake", bridgetest.Mode{})
	runtime.GC()
	debug.FreeOSMemory()
	limit := heldBytes() + 96<<20
	h := newHarness(t, bridge.Options{MemoryLimit: limit}, spec)
	ctx := testCtx(t, 60*time.Second)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)

	// Hold enough to pass 90% of the ceiling.
	ballast := make([]byte, 128<<20)
	for i := 0; i < len(ballast); i += 4096 {
		ballast[i] = 1
	}
	for id, req := range map[string]map[string]any{
		"call":    {"type": "tools:call", "server": spec.Name, "tool": "echo", "arguments": map[string]any{"x": 1}},
		"connect": {"type": "tools:connect", "server": spec.Name, "fingerprint": spec.Fingerprint, "confirmed": true},
		"chunk":   {"type": "tools:chunk", "seq": 0, "count": 2, "size": 100, "data": strings.Repeat("x", 50)},
	} {
		req["id"] = id
		m, err := p.Request(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		mustErr(t, m, bridge.CodeBusy)
		if !strings.Contains(m.Error.Message, "memory ceiling") {
			t.Fatalf("%s: the reason does not name the memory ceiling: %s", id, m)
		}
	}
	// An admin sees it: the ceiling's state, and the refused call and connect.
	fams := scrape(t, h.srv.URL+"/megane/builder-tools/metrics", nil)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"megane_bridge_memory_ceiling_refusing", nil, 1},
		{"megane_bridge_memory_limit_bytes", nil, float64(limit)},
		{"megane_bridge_calls_total", map[string]string{"server": "fake", "tool": "echo", "outcome": "refused"}, 1},
		{"megane_bridge_connects_total", map[string]string{"server": "fake", "outcome": "refused"}, 1},
	} {
		if got := value(fams, c.name, c.labels); got != c.want {
			t.Errorf("near the ceiling, %s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	runtime.KeepAlive(ballast)
	ballast = nil
	runtime.GC()
	debug.FreeOSMemory()

	m, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": "after", "server": spec.Name, "tool": "echo", "arguments": map[string]any{"x": 1}})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, m)
	if got := value(scrape(t, h.srv.URL+"/megane/builder-tools/metrics", nil), "megane_bridge_memory_ceiling_refusing", nil); got != 0 {
		t.Errorf("below the ceiling again, memory_ceiling_refusing = %v, want 0", got)
	}
	t.Logf("abuse: memory past 90%% of the ceiling | new connects, calls and chunks answered busy; served again below it | 3 of 3 refused, then served")
	if !strings.Contains(h.logBuf.String(), "near the memory ceiling") {
		t.Errorf("the refusals were not logged")
	}
}
