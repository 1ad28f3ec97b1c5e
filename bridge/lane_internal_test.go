package bridge

import (
	"testing"
	"time"
)

// acquired starts acquire on l and returns a channel that delivers the
// ticket when it is given one.
func acquired(l *lane) <-chan *laneTicket {
	got := make(chan *laneTicket, 1)
	go func() { got <- l.acquire() }()
	return got
}

// TestLane: the lane admits as many fresh holders as it has places; the
// next waits until a place is given back, or until a holder has held its
// place for longer than the lane's stale time (a page that stopped in the
// middle of a frame never holds up another page's large message).
func TestLane(t *testing.T) {
	const never = time.Hour
	for _, tc := range []struct {
		name   string
		places int
		stale  time.Duration
		// release: the first holder gives its place back (otherwise it
		// keeps it and only goes stale).
		release bool
	}{
		{"one place, given back", 1, never, true},
		{"two places, given back", 2, never, true},
		{"one place, holder stalls", 1, 50 * time.Millisecond, false},
		{"two places, holders stall", 2, 50 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLane(tc.places, tc.stale)
			var held []*laneTicket
			for range tc.places {
				select {
				case h := <-acquired(l):
					held = append(held, h)
				case <-time.After(5 * time.Second):
					t.Fatalf("only %d of %d places were given", len(held), tc.places)
				}
			}
			start := time.Now()
			next := acquired(l)
			if tc.stale == never {
				select {
				case <-next:
					t.Fatalf("a place was given while all %d were held", tc.places)
				case <-time.After(100 * time.Millisecond):
				}
			}
			if tc.release {
				held[0].release()
				held = held[1:]
			}
			select {
			case h := <-next:
				held = append(held, h)
				if !tc.release && time.Since(start) < tc.stale {
					t.Errorf("a place was given after %v, before the holders went stale (%v)", time.Since(start), tc.stale)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the waiter never got a place")
			}
			for _, h := range held {
				h.release()
			}
			l.mu.Lock()
			n := len(l.held)
			l.mu.Unlock()
			if n != 0 {
				t.Errorf("%d places still held after every holder gave its back", n)
			}
		})
	}
}

// TestLaneDefault: a lane with zero places leaves one processor free, and
// has at least one place.
func TestLaneDefault(t *testing.T) {
	l := newLane(0, 0)
	if l.places < 1 || l.stale != laneStale {
		t.Errorf("newLane(0, 0) = %d places, stale %v; want at least one, %v", l.places, l.stale, laneStale)
	}
}
