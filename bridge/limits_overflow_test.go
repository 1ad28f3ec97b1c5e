package bridge_test

import (
	"math"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
)

// TestHugeLimitsServePages: sizes as large as an int64 holds (as a program
// embedding the bridge may set them) count as bridge.SizeMax, so that no
// sum of limits overflows: with ResultLimit at MaxInt64 the outbound
// budget went negative and every page was closed as not reading (4408).
func TestHugeLimitsServePages(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts bridge.Options
	}{
		{"result limit", bridge.Options{ResultLimit: math.MaxInt64}},
		{"every size", bridge.Options{ResultLimit: math.MaxInt64, MemoryLimit: math.MaxInt64, OutboundBytes: math.MaxInt64,
			OutboundTotal: math.MaxInt64, ChunkMemory: math.MaxInt64, InboundMemory: math.MaxInt64, InboundLimit: math.MaxInt64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := echoCalls(t, tc.opts, 3)
			h.b.Close()
			t.Logf("abuse: %s at MaxInt64 | clamped to 1 TiB, no sum overflows; pages served | 3 of 3 calls answered", tc.name)
		})
	}
}
