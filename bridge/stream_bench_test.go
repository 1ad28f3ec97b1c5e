package bridge_test

import (
	"context"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// BenchmarkStreamRelay: a 40 MB result from the bridgetest big tool to a
// page in this process, held whole (binary chunk frames) and streamed; the
// bridge runs in this process too, so a CPU profile shows both sides.
func BenchmarkStreamRelay(b *testing.B) {
	for _, kind := range []struct {
		name     string
		features []string
	}{{"whole", []string{"binary"}}, {"stream", []string{"binary", "stream"}}} {
		b.Run(kind.name, func(b *testing.B) {
			spec := fakeServer(b, "lab", bridgetest.Mode{})
			h := newHarness(b, bridge.Options{}, spec)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			p := h.page(ctx)
			if _, err := p.Request(ctx, map[string]any{"type": "tools:hello", "id": "h", "features": kind.features}); err != nil {
				b.Fatal(err)
			}
			connect(b, ctx, p, 1, spec)
			b.SetBytes(40e6)
			for i := 0; b.Loop(); i++ {
				r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 10 + i, "server": "lab", "tool": "big", "arguments": map[string]any{"bytes": 40_000_000}})
				if err != nil || r.OK == nil || !*r.OK {
					b.Fatalf("%v %.200s", err, r)
				}
			}
		})
	}
}
