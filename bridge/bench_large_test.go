package bridge_test

import (
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// BenchmarkLargeResult relays a 500,000-atom Builder result (about 29 MB of
// JSON) from a stdio server to a page, in process, and reports the bytes
// the bridge and the page client allocate per call (-benchmem).
func BenchmarkLargeResult(b *testing.B) {
	ctx := testCtx(b, 10*time.Minute)
	spec := fakeServer(b, "atoms", bridgetest.Mode{})
	h := newHarness(b, bridge.Options{}, spec)
	p := h.page(ctx)
	connect(b, ctx, p, "c", spec)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": i, "server": "atoms", "tool": "atoms", "arguments": map[string]any{"n": 500000, "seed": 1}})
		if err != nil || r.OK == nil || !*r.OK {
			b.Fatalf("call: %v %v", err, r)
		}
		b.SetBytes(int64(len(r.Fields["result"])))
	}
}
