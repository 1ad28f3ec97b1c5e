package bridge

import (
	"fmt"
	"runtime/metrics"
	"sync"
)

// memoryRefuseAt is the share of Options.MemoryLimit above which new work
// is refused.
const memoryRefuseAt = 0.9

// memoryGauge reads the Go runtime's own view of the memory it holds
// (/memory/classes/total:bytes less /memory/classes/heap/released:bytes:
// heap, stacks and runtime structures that the runtime has mapped and not
// handed back to the system), cheaply enough to ask before every new
// request.
type memoryGauge struct {
	mu     sync.Mutex
	sample []metrics.Sample // guarded by mu
}

func newMemoryGauge() *memoryGauge {
	return &memoryGauge{sample: []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}}
}

func (g *memoryGauge) bytes() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	metrics.Read(g.sample)
	if g.sample[0].Value.Kind() != metrics.KindUint64 || g.sample[1].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(g.sample[0].Value.Uint64() - g.sample[1].Value.Uint64())
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
	used := b.mem.bytes()
	if float64(used) < memoryRefuseAt*float64(limit) {
		return nil
	}
	b.log.Warn("near the memory ceiling: refusing new work", "used_bytes", used, "limit_bytes", limit)
	return errorf(CodeBusy, "the bridge is near its memory ceiling (%s of %s): try again when the running calls have finished", mib(used), mib(limit))
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
