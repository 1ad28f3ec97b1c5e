package bridge

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// The page's frames are read in pieces, each counted against one budget
// for all tabs (Options.InboundMemory) before it is read, and handed back
// once the frame has been handled or the tab has ended. A WebSocket frame
// announces its length before its payload, and a page that sends most of a
// large frame and then stops would otherwise hold that memory for as long
// as its socket lives, per tab, with nothing counting it.

// inboundPiece is the first piece a frame is read into; later pieces double
// up to inboundPieceMax.
const (
	inboundPiece    = 1 << 10
	inboundPieceMax = 1 << 20
)

// inboundPieceBulk is the piece size from which reading a piece is bulk
// work (lane.go): the pieces of a small frame never wait.
const inboundPieceBulk = 64 << 10

// errInboundFull is readFrame's error when the tab cannot have its share of
// the budget: the tab has been closed with the reason.
var errInboundFull = errors.New("the inbound memory is full")

// inboundPool counts the bytes of the frames the tabs are reading.
type inboundPool struct {
	limit int64

	freed atomic.Int64 // bytes handed back since the memory was last returned to the system

	mu      sync.Mutex
	used    int64                  // guarded by mu; the sum of held
	garbage garbageMeter           // guarded by mu; pieces handed back or evicted, until collected (results.go)
	held    map[*tab]int64         // guarded by mu; by tab, only tabs holding some
	evicted map[*tab]struct{}      // guarded by mu; tabs closed to make room, until they end
	dying   map[*tab]int64         // guarded by mu; what evicted tabs still hold (counted in used) until their readers end
	ended   map[*tab]chan struct{} // guarded by mu; closed by end when an evicted tab's reader has ended
}

func newInboundPool(limit int64) *inboundPool {
	return &inboundPool{limit: limit, held: map[*tab]int64{}, evicted: map[*tab]struct{}{},
		dying: map[*tab]int64{}, ended: map[*tab]chan struct{}{}, garbage: newGarbageMeter()}
}

// reserve counts n more bytes for t's frame. When they do not fit, the tab
// that cannot have its share is closed: t itself if it would hold more than
// an equal share of the budget among the tabs reading a frame (false),
// else the tab holding the most, whose bytes are handed back at once (its
// reader ends within a moment), and t tries again.
func (p *inboundPool) reserve(t *tab, n int64) bool {
	for {
		p.mu.Lock()
		if _, gone := p.evicted[t]; gone {
			p.mu.Unlock()
			return false
		}
		if p.used+p.garbage.now()+n <= p.limit {
			p.used += n
			p.held[t] += n
			p.mu.Unlock()
			return true
		}
		if p.garbage.now() > 0 && p.used+n <= p.limit {
			// Room once what was handed back is collected: the pieces
			// of frames handled, or of tabs closed, are the process's
			// memory until then.
			p.garbage.force(&p.mu)
			p.mu.Unlock()
			continue
		}
		if len(p.dying) > 0 {
			// A tab closed to make room has not dropped its pieces yet:
			// wait for it rather than close another.
			var ended chan struct{}
			for _, c := range p.ended {
				ended = c
				break
			}
			p.mu.Unlock()
			select {
			case <-ended:
			case <-t.done:
				return false
			case <-time.After(evictedWait):
			}
			continue
		}
		readers := int64(len(p.held))
		if _, ok := p.held[t]; !ok {
			readers++
		}
		share := p.limit / readers
		mine := p.held[t]
		var worst *tab
		for o, h := range p.held {
			if o != t && (worst == nil || h > p.held[worst]) {
				worst = o
			}
		}
		if mine+n > share || worst == nil {
			used := p.used
			p.mu.Unlock()
			t.b.log.Warn("inbound memory full: closing the tab over its share", "tab", t.id, "held_bytes", mine, "want_bytes", n, "used_bytes", used, "limit_bytes", p.limit)
			t.closeWith(CloseTryLater, fmt.Sprintf("the bridge holds as much of unfinished messages from pages as it may (%s of %s), and this page's share (%s) is used: send large messages as tools:chunk frames, or try again shortly", mib(used), mib(p.limit), mib(share)))
			return false
		}
		// The tab holding the most is closed and its reads cut; what it
		// holds stays counted until its reader has ended and dropped its
		// pieces (then it is garbage until collected), and t waits for
		// that before it looks again.
		most := p.held[worst]
		delete(p.held, worst)
		p.dying[worst] = most
		ended := make(chan struct{})
		p.ended[worst] = ended
		p.evicted[worst] = struct{}{}
		p.mu.Unlock()
		t.b.log.Warn("inbound memory full: closing the tab holding the most of an unfinished frame", "tab", worst.id, "held_bytes", most, "for_tab", t.id, "limit_bytes", p.limit)
		worst.closeWith(CloseTryLater, fmt.Sprintf("the bridge needed room for other pages' messages, and this page held the most of an unfinished one (%s): send large messages as tools:chunk frames, or try again shortly", mib(most)))
		worst.cutReads()
		select {
		case <-ended:
		case <-t.done:
			return false
		case <-time.After(evictedWait):
		}
	}
}

// evictedWait bounds how long a tab waits for the reader of a tab closed
// to make room for it to end (its reads are cut at once: moments).
const evictedWait = 5 * time.Second

// release hands back everything t holds and returns how much that was.
func (p *inboundPool) release(t *tab) int64 {
	p.mu.Lock()
	n := p.held[t]
	p.used -= n
	p.garbage.add(n)
	delete(p.held, t)
	p.mu.Unlock()
	return n
}

// end forgets t, whose reader has returned, and hands back what it held
// (evicted or not).
func (p *inboundPool) end(t *tab) int64 {
	n := p.release(t)
	p.mu.Lock()
	delete(p.evicted, t)
	if d, ok := p.dying[t]; ok {
		p.used -= d
		p.garbage.add(d)
		n += d
		delete(p.dying, t)
	}
	if ended := p.ended[t]; ended != nil {
		close(ended)
		delete(p.ended, t)
	}
	p.mu.Unlock()
	return n
}

// readFrame reads one frame's payload from r in pieces, each counted
// against the inbound budget before it is read; the caller hands the count
// back (inbound.release) once the frame has been handled. A frame read in
// more than one piece is joined into one slice (counted too, while the
// pieces are dropped).
func (t *tab) readFrame(r io.Reader) ([]byte, error) {
	pool := t.b.inbound
	var pieces [][]byte
	var total int64
	size := int64(inboundPiece)
	for {
		if !pool.reserve(t, size) {
			return nil, errInboundFull
		}
		var place *laneTicket
		if size >= inboundPieceBulk {
			place = t.b.lane.acquire()
		}
		buf := make([]byte, size)
		n := 0
		var err error
		for n < len(buf) && err == nil {
			var k int
			k, err = r.Read(buf[n:])
			n += k
		}
		if place != nil {
			place.release()
		}
		pieces = append(pieces, buf[:n])
		total += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		size = min(size*2, inboundPieceMax)
	}
	if len(pieces) == 1 {
		return pieces[0], nil
	}
	if !pool.reserve(t, total) {
		return nil, errInboundFull
	}
	frame := make([]byte, 0, total)
	for i, p := range pieces {
		frame = append(frame, p...)
		pieces[i] = nil
	}
	return frame, nil
}

// releaseInbound hands back the count of t's frame (all of it when the
// tab's reader has ended); once ReleaseAfter bytes have been handed back,
// the memory they freed goes back to the system.
func (t *tab) releaseInbound(ended bool) {
	var n int64
	if ended {
		n = t.b.inbound.end(t)
	} else {
		n = t.b.inbound.release(t)
	}
	if n < inboundPieceMax {
		return // a small frame: its memory is the collector's business
	}
	if after := t.b.opts.ReleaseAfter; after >= 0 && t.b.inbound.freed.Add(n) >= after {
		// Many tabs' frames add up: count what was handed back since the
		// last return, not only this frame.
		t.b.inbound.freed.Store(0)
		place := t.b.lane.acquire()
		debug.FreeOSMemory()
		place.release()
	}
}
