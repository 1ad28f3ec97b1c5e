package bridge

import (
	"runtime"
	"sync"
	"time"
)

// The bulk lane keeps one processor free for small work. Reading a large
// frame from a page (a copy from the socket, the unmasking, the first
// touch of fresh memory) and handing memory back to the system are work
// that runs as long as there are bytes: ten pages sending large frames at
// once would keep every processor busy, and a small call's goroutines
// would queue behind them for the scheduler's time slice each (measured
// with TestMixedAbuse's stalled frames alone: a legitimate echo call's p99
// went from 3 ms to 33-148 ms, with scheduling delays of up to 58 ms
// inside the bridge). Bulk work takes a place in the lane first, and the
// lane has one place fewer than the processors (at least one).
//
// A place is held for one piece of work. A holder that has held its place
// for longer than laneStale is waiting for its page, not using a
// processor (a page that stops in the middle of a frame), and no longer
// counts: the next goroutine goes in, so that a stalled page never holds
// up another page's large message.

// laneStale is how long a place counts as in use, by default.
const laneStale = 10 * time.Millisecond

// lane admits a bounded number of goroutines to bulk work at a time.
type lane struct {
	places int           // fixed by newLane
	stale  time.Duration // fixed by newLane; how long a place counts as in use

	mu      sync.Mutex
	held    map[*laneTicket]struct{} // guarded by mu; places taken and not given back
	changed chan struct{}            // guarded by mu; closed (and replaced) when a place is given back
}

// laneTicket is one place taken; release gives it back.
type laneTicket struct {
	l    *lane
	from time.Time
}

// newLane returns a lane with places places (if zero, one fewer than
// GOMAXPROCS, at least one) held for at most stale each (if zero,
// laneStale).
func newLane(places int, stale time.Duration) *lane {
	if places <= 0 {
		places = max(1, runtime.GOMAXPROCS(0)-1)
	}
	if stale <= 0 {
		stale = laneStale
	}
	return &lane{places: places, stale: stale, held: map[*laneTicket]struct{}{}, changed: make(chan struct{})}
}

// acquire waits for a place: until fewer than places holders have held
// theirs for less than l.stale. It never waits longer than l.stale at a
// time without looking again, and starts no goroutine.
func (l *lane) acquire() *laneTicket {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		now := time.Now()
		l.mu.Lock()
		busy := 0
		var oldest time.Time
		for h := range l.held {
			if now.Sub(h.from) < l.stale {
				busy++
				if oldest.IsZero() || h.from.Before(oldest) {
					oldest = h.from
				}
			}
		}
		if busy < l.places {
			t := &laneTicket{l: l, from: now}
			l.held[t] = struct{}{}
			l.mu.Unlock()
			return t
		}
		changed := l.changed
		l.mu.Unlock()
		wait := oldest.Add(l.stale).Sub(now)
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-changed:
		case <-timer.C:
		}
	}
}

// release gives the place back.
func (t *laneTicket) release() {
	l := t.l
	l.mu.Lock()
	delete(l.held, t)
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}
