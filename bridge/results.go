package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// The answers tool servers send over Streamable HTTP are read into memory
// whole (a JSON body, or an event's data), and each call's result stays
// there until its answer is queued for the page. Every byte of those
// buffers, at its capacity, is reserved against one budget for all servers
// and calls (Options.ResultMemory) before it is read: decompressed bytes as
// they are produced, a buffer that grows counted old and new while both
// live. A read that cannot get room stops at once, and the call it answers
// fails with busy (too-large if it could never fit), so that six large
// results at once, or four gzip bombs, cannot pass the memory ceiling.

// resultPool counts the bytes of server answers being read or held for
// their calls. Safe for concurrent use. A nil pool counts nothing.
//
// A buffer handed back is garbage until the collector has run, and the
// memory it takes is the process's all that time: what is counted must be
// what is allocated. So its bytes are not free again until a collection
// has run since (two completed cycles, or one the pool forced): a reader
// that would find room once the garbage is collected forces one (at most
// one every gcEvery; it waits for its turn) and looks again. Without this, readers refused one after
// another (four 255 MiB gzip results at once, in a loop) each allocated
// afresh while the last one's buffer waited for the collector, and the
// bridge's RSS passed its ceiling by garbage alone.
type resultPool struct {
	limit int64

	mu      sync.Mutex
	used    int64         // guarded by mu
	peak    int64         // guarded by mu; the most used at once, garbage included (tests, metrics)
	garbage garbageMeter  // guarded by mu
	waiting bool          // guarded by mu; a growing reader waits for room (at most one: see reserve)
	freed   chan struct{} // guarded by mu; closed (and replaced) by release while a reader waits
}

func newResultPool(limit int64) *resultPool {
	return &resultPool{limit: limit, garbage: newGarbageMeter()}
}

// garbageMeter counts the bytes of large buffers handed back that the
// collector may not have freed yet: a pool counts them until two
// collections have completed since the last was added, or one it forced.
// The zero value counts nothing (garbage is free at once). Its user
// guards it.
type garbageMeter struct {
	gc       *gcClock
	bytes    int64
	at       uint64    // the completed cycles when bytes were last added
	forcedAt time.Time // when a collection was last forced (force)
}

func newGarbageMeter() garbageMeter { return garbageMeter{gc: newGCClock()} }

// add counts n bytes handed back.
func (g *garbageMeter) add(n int64) {
	if g.gc == nil || n <= smallAnswer {
		return // small buffers are the collector's business
	}
	g.bytes += n
	g.at = g.gc.cycles()
}

// now is the garbage still counted.
func (g *garbageMeter) now() int64 {
	if g.bytes > 0 && g.gc.cycles() >= g.at+2 {
		g.bytes = 0
	}
	return g.bytes
}

// force runs a full collection, at most one every gcEvery (waiting for its
// turn), with mu unlocked meanwhile, and then counts no garbage.
func (g *garbageMeter) force(mu *sync.Mutex) {
	wait := gcEvery - time.Since(g.forcedAt)
	g.forcedAt = time.Now().Add(max(wait, 0))
	mu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
	}
	runtime.GC() // a full cycle: what was garbage before it is gone
	mu.Lock()
	g.bytes = 0
}

// gcEvery bounds how often a pool forces a collection: a reader that
// needs one sooner waits for it.
const gcEvery = 10 * time.Millisecond

// gcClock reads how many collections have completed.
type gcClock struct {
	mu     sync.Mutex
	sample []metrics.Sample // guarded by mu
}

func newGCClock() *gcClock {
	return &gcClock{sample: []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}}
}

func (c *gcClock) cycles() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	metrics.Read(c.sample)
	if c.sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return c.sample[0].Value.Uint64()
}

// errNoRoom is the read error when the pool cannot take a buffer's growth:
// size is the bytes the message needed room for, held what its reader
// held already (both live while a buffer grows), used what all readers
// held.
type errNoRoom struct {
	size, held, used, limit int64
}

// never reports whether the growth failed with the pool to itself (or the
// bytes alone are more than it holds): retrying cannot help. A reader that
// failed while others held room is busy, whatever its own size.
func (e *errNoRoom) never() bool { return e.size > e.limit || e.used == e.held }

func (e *errNoRoom) Error() string {
	if e.never() {
		return fmt.Sprintf("an answer of more than %s needs more than the bridge's room for results in flight (%s) while it is read", mib(e.size), mib(e.limit))
	}
	return fmt.Sprintf("the bridge has no room now for an answer of more than %s: %s of its %s for results in flight are taken by other calls; try again when they have finished", mib(e.size), mib(e.used-e.held), mib(e.limit))
}

// data is the error's data in the JSON-RPC error the bridge puts in place
// of the answer (codeNoRoom).
func (e *errNoRoom) data() json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"size":%d,"never":%t,"limit":%d}`, e.size, e.never(), e.limit))
}

// reserve counts between least and most more bytes, as many as fit, and
// returns how many; or an *errNoRoom when not even least fit. held is what
// the reader holds already, size the bytes its message needs room for.
func (p *resultPool) reserve(least, most, held, size int64) (int64, error) {
	if p == nil {
		return most, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if size <= smallAnswer && most <= smallAnswer {
		// A small answer is always read (counted, and past the limit if
		// need be): a pool full of large results must not refuse every
		// other call's small one.
		p.used += most
		p.peak = max(p.peak, p.used+p.garbage.bytes) // as last counted: no need to ask the runtime here
		return most, nil
	}
	var waitUntil time.Time
	for {
		garbage := p.garbage.now()
		free := p.limit - p.used - garbage
		if free < least && garbage > 0 && p.used+least <= p.limit {
			// Room once the garbage is collected: force a collection, then
			// look again.
			p.garbage.force(&p.mu)
			garbage, free = 0, p.limit-p.used
		}
		if free >= least {
			break
		}
		nr := &errNoRoom{size: size, held: held, used: p.used + garbage, limit: p.limit}
		// Readers whose answers grow together can each hold part of the
		// budget and all be refused their next growth: one growing
		// reader may wait for room (the others, refused, hand theirs
		// back), so that one of them always gets through.
		if held == 0 || nr.never() || (p.waiting && waitUntil.IsZero()) {
			return 0, nr
		}
		if waitUntil.IsZero() {
			waitUntil, p.waiting = time.Now().Add(roomWait), true
			defer func() { p.waiting = false }()
		}
		wait := time.Until(waitUntil)
		if wait <= 0 {
			return 0, nr
		}
		if p.freed == nil {
			p.freed = make(chan struct{})
		}
		freed := p.freed
		p.mu.Unlock()
		timer := time.NewTimer(wait)
		select {
		case <-freed:
		case <-timer.C:
		}
		timer.Stop()
		p.mu.Lock()
	}
	garbage := p.garbage.now()
	free := p.limit - p.used - garbage
	n := min(most, free)
	p.used += n
	p.peak = max(p.peak, p.used+garbage)
	return n, nil
}

// roomWait bounds how long the one growing reader that may wait for room
// waits (see reserve).
const roomWait = 2 * time.Second

// smallAnswer is the largest answer always given room (see reserve).
const smallAnswer = 256 << 10

// release hands n bytes back.
func (p *resultPool) release(n int64) {
	if p == nil || n <= 0 {
		return
	}
	p.mu.Lock()
	p.used -= n
	p.garbage.add(n) // garbage until collected (see resultPool)
	if p.freed != nil {
		close(p.freed)
		p.freed = nil
	}
	p.mu.Unlock()
}

// inUse is what the pool's readers and results hold now, the bytes handed
// back that may not have been collected yet, and the most counted at once
// (both together).
func (p *resultPool) inUse() (used, garbage, peak int64) {
	if p == nil {
		return 0, 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used, p.garbage.now(), p.peak
}

// budgetBuf is a byte slice whose capacity is reserved in a pool. The zero
// value with a nil pool is a plain growing slice.
type budgetBuf struct {
	pool *resultPool
	max  int64 // the most bytes it may hold; growth stops there
	b    []byte
	held int64 // reserved for b's capacity
}

// minGrowth is the first capacity a budgetBuf takes.
const minGrowth = 32 << 10

// ensure makes room for n more bytes, reserving the new capacity before
// allocating it (old and new are both live while the bytes are copied): up
// to four times the old capacity (capped at max), or as much of that as the
// pool has free. Growing fourfold, the old buffer is at most a quarter of
// the new: an answer near the limit needs 5/4 of its size while it is
// read, not 3/2 as when doubling.
func (bb *budgetBuf) ensure(n int) error {
	need := int64(len(bb.b) + n)
	if need <= int64(cap(bb.b)) {
		return nil
	}
	want := max(4*int64(cap(bb.b)), need, minGrowth)
	if bb.max > 0 {
		want = min(want, max(bb.max, need))
	}
	got, err := bb.pool.reserve(need, want, bb.held, need)
	if err != nil {
		return err
	}
	nb := make([]byte, len(bb.b), got)
	copy(nb, bb.b)
	bb.pool.release(bb.held)
	bb.b, bb.held = nb, got
	return nil
}

// write appends p.
func (bb *budgetBuf) write(p []byte) error {
	if err := bb.ensure(len(p)); err != nil {
		return err
	}
	bb.b = append(bb.b, p...)
	return nil
}

// take hands over the bytes and their reservation.
func (bb *budgetBuf) take() ([]byte, int64) {
	b, h := bb.b, bb.held
	bb.b, bb.held = nil, 0
	return b, h
}

// free drops the bytes and hands their reservation back.
func (bb *budgetBuf) free() {
	bb.pool.release(bb.held)
	bb.b, bb.held = nil, 0
}

// readBody reads an answer's body into memory reserved in pool: of
// exactly size bytes when the length is known (refused at once when it is
// over limit or finds no room), else growing as it is read. More than
// limit bytes gives errBodyOverLimit (what was read is dropped).
func readBody(r io.Reader, size, limit int64, pool *resultPool) ([]byte, int64, error) {
	bb := budgetBuf{pool: pool, max: limit + 1}
	if size > limit {
		return nil, 0, errBodyOverLimit
	}
	if size >= 0 {
		if err := bb.ensure(int(size) + 1); err != nil {
			return nil, 0, err
		}
	}
	var probe [512]byte
	for {
		var n int
		var err error
		if len(bb.b) == cap(bb.b) {
			// Full: a small read first, so that a body that ends exactly
			// here does not grow the buffer to find its end.
			n, err = r.Read(probe[:])
			if n > 0 {
				if werr := bb.write(probe[:n]); werr != nil {
					bb.free()
					return nil, 0, werr
				}
				n = 0
			}
		} else {
			n, err = r.Read(bb.b[len(bb.b):cap(bb.b)])
		}
		bb.b = bb.b[:len(bb.b)+n]
		if int64(len(bb.b)) > limit {
			bb.free()
			return nil, 0, errBodyOverLimit
		}
		if err == io.EOF {
			b, h := bb.take()
			return b, h, nil
		}
		if err != nil {
			bb.free()
			return nil, 0, err
		}
	}
}

var errBodyOverLimit = errors.New("over the result limit")
