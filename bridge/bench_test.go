package bridge_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
)

// BenchmarkLoad runs the full load of TestLoad (50 tabs × 200 calls, 3
// progress notifications each) over one shared session, checks every
// result and progress notification, and reports calls per second and the
// heap's peak growth. `make bench` runs it.
func BenchmarkLoad(b *testing.B) { benchLoad(b, loadOptions()) }

// BenchmarkLoadAudited is BenchmarkLoad with an audit file: one JSON line
// written per call besides the log line and the metrics every run has.
func BenchmarkLoadAudited(b *testing.B) {
	opts := loadOptions()
	opts.AuditFile = filepath.Join(b.TempDir(), "audit.jsonl")
	benchLoad(b, opts)
}

func benchLoad(b *testing.B, opts bridge.Options) {
	servers := loadServers(b, 1)
	h := newHarness(b, opts, servers...)
	ctx := testCtx(b, 10*time.Minute)
	ls := loadSpec{tabs: 50, calls: 200, window: 4, steps: 3, servers: 1}
	var calls float64
	var elapsed time.Duration
	var grown uint64
	for b.Loop() {
		res := runLoad(b, ctx, h.wsURL, servers, ls)
		for _, p := range res.problems {
			b.Error(p)
		}
		calls += float64(res.calls)
		elapsed += res.elapsed
		grown = max(grown, res.heapPeak-min(res.heapPeak, res.heapBase))
	}
	b.ReportMetric(calls/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(grown)/(1<<20), "heap-MiB")
}
