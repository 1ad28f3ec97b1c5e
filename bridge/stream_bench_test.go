package bridge_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// BenchmarkStreamRelay: a 40 MB result from the bridgetest big tool to a
// page in this process, held whole (binary chunk frames) and streamed; the
// bridge runs in this process too, so a CPU profile shows both sides.
// MEGANE_BENCH_ATOMS=1 asks the atoms tool instead (arrays of numbers).
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
			tool, args := "big", map[string]any{"bytes": 40_000_000}
			if os.Getenv("MEGANE_BENCH_ATOMS") != "" {
				// A result of numbers, like a structure's (the tool's work included).
				tool, args = "atoms", map[string]any{"n": 500000, "seed": 7}
			}
			b.SetBytes(40e6)
			for i := 0; b.Loop(); i++ {
				r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 10 + i, "server": "lab", "tool": tool, "arguments": args})
				if err != nil || r.OK == nil || !*r.OK {
					b.Fatalf("%v %.200s", err, r)
				}
			}
		})
	}
}
