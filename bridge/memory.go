package bridge

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// memoryRefuseAt is the share of Options.MemoryLimit above which new work
// is refused.
const memoryRefuseAt = 0.9

// memoryGauge reads the Go runtime's own view of the memory it holds,
// cheaply enough to ask before every new request: what it has mapped and
// not handed back to the system (/memory/classes/total:bytes less
// /memory/classes/heap/released:bytes), and what of that is live (the heap
// the last collection found live, plus stacks and the runtime's own
// structures). Under a memory limit the mapped memory sits near the limit
// whenever garbage has piled up, which the next collection frees: only
// live memory near the ceiling is a reason to refuse work.
type memoryGauge struct {
	mu       sync.Mutex
	sample   []metrics.Sample // guarded by mu
	lastGC   uint64           // guarded by mu; /gc/cycles/total:gc-cycles when live was last fresh
	forcedAt time.Time        // guarded by mu; when refresh last ran a collection

	refusing atomic.Bool // the last check refused new work (megane_bridge_memory_ceiling_refusing)
}

var memoryMetrics = []string{
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/gc/heap/live:bytes",
	"/gc/cycles/total:gc-cycles",
}

func newMemoryGauge() *memoryGauge {
	g := &memoryGauge{}
	for _, n := range memoryMetrics {
		g.sample = append(g.sample, metrics.Sample{Name: n})
	}
	_, _, g.lastGC = g.read() // a collection before the bridge existed says nothing of it
	return g
}

// read returns the mapped and the live bytes (see memoryGauge), and the
// count of collections so far.
func (g *memoryGauge) read() (mapped, live int64, cycles uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	metrics.Read(g.sample)
	v := make([]uint64, len(g.sample))
	for i, s := range g.sample {
		if s.Value.Kind() != metrics.KindUint64 {
			return 0, 0, 0
		}
		v[i] = s.Value.Uint64()
	}
	total, released, free, objects, unused, heapLive := v[0], v[1], v[2], v[3], v[4], v[5]
	nonHeap := total - released - free - objects - unused
	return int64(total - released), int64(heapLive + nonHeap), v[6]
}

// bytes is the mapped memory (see read).
func (g *memoryGauge) bytes() int64 {
	mapped, _, _ := g.read()
	return mapped
}

// liveFresh is the live memory as a collection that ran after the mapped
// memory passed the threshold found it: when none has run since the last
// look, it runs one itself, at most once a second (a request near the
// ceiling may wait for it; the others meanwhile see the last figure).
func (g *memoryGauge) liveFresh() int64 {
	_, live, cycles := g.read()
	g.mu.Lock()
	stale := cycles == g.lastGC && time.Since(g.forcedAt) >= time.Second
	if stale {
		g.forcedAt = time.Now()
	}
	g.mu.Unlock()
	if stale {
		runtime.GC()
		_, live, cycles = g.read()
	}
	g.mu.Lock()
	g.lastGC = cycles
	g.mu.Unlock()
	return live
}

// MemoryLimit is the ceiling in force (Options.MemoryLimit with its
// default); 0 when there is none. The program that serves the bridge
// should give it to the Go runtime too (debug.SetMemoryLimit), so that the
// collector works harder near it; the bridge does not, since that setting
// belongs to the whole process.
func (b *Bridge) MemoryLimit() int64 { return max(b.opts.MemoryLimit, 0) }

// memoryRefusal is the busy error for new work near the ceiling, or nil.
func (b *Bridge) memoryRefusal() *protoError {
	limit := b.opts.MemoryLimit
	if limit <= 0 {
		return nil
	}
	if float64(b.mem.bytes()) < memoryRefuseAt*float64(limit) {
		b.mem.refusing.Store(false)
		return nil
	}
	used := b.mem.liveFresh()
	if float64(used) < memoryRefuseAt*float64(limit) {
		b.mem.refusing.Store(false)
		return nil // garbage the collector is about to free, not a reason to refuse
	}
	b.mem.refusing.Store(true)
	b.log.Warn("near the memory ceiling: refusing new work", "used_bytes", used, "limit_bytes", limit)
	return errorf(CodeBusy, "the bridge is near its memory ceiling (%s of %s): try again when the running calls have finished", mib(used), mib(limit))
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
