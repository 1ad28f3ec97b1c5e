package main

import (
	"container/list"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"
)

// Connection bounds of serve. A page needs one connection: its WebSocket,
// which leaves net/http once upgraded (hijacked). Everything else (a request
// in progress, a kept-alive connection between requests, a connection that
// has sent nothing yet) is "pending", and pending connections are what an
// abuser piles up. So:
//
//   - at most maxPending pending connections: a new connection beyond it
//     closes the pending connection that has waited longest without a
//     request in progress (new or idle), so a page that connects now is
//     served within one round trip however many idle connections press;
//     if every pending connection has a request in progress, the new one
//     is closed;
//   - at most maxConns connections in all, upgraded sockets included; beyond
//     it the same eviction applies, and if only sockets are left, the new
//     connection is closed;
//   - idle kept-alive connections are closed after idleTimeout, and a
//     request's header must arrive within readHeaderTimeout, each
//     connection's deadlines later by a share of deadlineSpread of its own:
//     connections opened together (an abuser's hundreds, opened at once and
//     reopened as soon as they are closed) time out spread over that time,
//     not in one burst, in which a page's message would wait behind
//     hundreds of closes and accepts (measured with TestMixedAbuse's idle
//     connections alone: 300 closed together put a legitimate call's p99
//     inside the bridge at 17-28 ms, against 2 ms quiet).
const (
	maxPending        = 512
	maxConns          = 8192
	idleTimeout       = 30 * time.Second
	readHeaderTimeout = 10 * time.Second
	deadlineSpread    = 2 * time.Second
)

// connLimiter tracks every connection accepted by the listeners it wraps
// (serve listens on 127.0.0.1 and ::1: one limit for both); http.Server
// reports each connection's state to track.
type connLimiter struct {
	maxPending, maxConns int

	mu      sync.Mutex
	total   int                             // guarded by mu; open connections
	pending *list.List                      // guarded by mu; of *limitedConn, oldest first, not yet upgraded
	byConn  map[*limitedConn]*list.Element  // guarded by mu; the pending list's elements
	states  map[*limitedConn]http.ConnState // guarded by mu; last state of pending connections
}

func newConnLimiter(maxPending, maxConns int) *connLimiter {
	return &connLimiter{maxPending: maxPending, maxConns: maxConns,
		pending: list.New(), byConn: map[*limitedConn]*list.Element{}, states: map[*limitedConn]http.ConnState{}}
}

// limitedListener is one listener under a connLimiter.
type limitedListener struct {
	net.Listener
	l *connLimiter
}

// wrap returns ln with its connections counted and bounded by l.
func (l *connLimiter) wrap(ln net.Listener) net.Listener { return &limitedListener{ln, l} }

// limitedConn is one accepted connection; Close is counted once.
type limitedConn struct {
	net.Conn
	l     *connLimiter
	later time.Duration // fixed at accept: what its read deadlines are put off by, under deadlineSpread
	once  sync.Once
}

// newLimitedConn wraps raw, with a share of deadlineSpread of its own.
func newLimitedConn(raw net.Conn, l *connLimiter) *limitedConn {
	return &limitedConn{Conn: raw, l: l, later: rand.N(deadlineSpread)}
}

// SetReadDeadline puts a deadline in the future off by c's share of
// deadlineSpread; a deadline already past (an aborted read) or none is
// set as it is.
func (c *limitedConn) SetReadDeadline(t time.Time) error {
	if t.After(time.Now()) {
		t = t.Add(c.later)
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.total--
		c.l.forget(c)
		c.l.mu.Unlock()
	})
	return err
}

// forget removes c from the pending list. Called with mu held.
func (l *connLimiter) forget(c *limitedConn) {
	if e, ok := l.byConn[c]; ok {
		l.pending.Remove(e)
		delete(l.byConn, c)
		delete(l.states, c)
	}
}

func (ll *limitedListener) Accept() (net.Conn, error) {
	l := ll.l
	for {
		raw, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := newLimitedConn(raw, l)
		l.mu.Lock()
		var evict *limitedConn
		if l.pending.Len() >= l.maxPending || l.total >= l.maxConns {
			evict = l.oldestWaiting()
			if evict == nil {
				l.mu.Unlock()
				raw.Close() // everything is busy or upgraded: no room
				continue
			}
			l.forget(evict)
		}
		l.total++
		l.byConn[c] = l.pending.PushBack(c)
		l.states[c] = http.StateNew
		l.mu.Unlock()
		if evict != nil {
			evict.Close()
		}
		return c, nil
	}
}

// oldestWaiting is the oldest pending connection without a request in
// progress, or nil. Called with mu held.
func (l *connLimiter) oldestWaiting() *limitedConn {
	for e := l.pending.Front(); e != nil; e = e.Next() {
		c := e.Value.(*limitedConn)
		if s := l.states[c]; s == http.StateNew || s == http.StateIdle {
			return c
		}
	}
	return nil
}

// track is http.Server.ConnState: an upgraded (hijacked) connection is no
// longer pending; a closed one is forgotten (its Close counts it).
func (l *connLimiter) track(conn net.Conn, state http.ConnState) {
	c, ok := conn.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateHijacked, http.StateClosed:
		l.forget(c)
	default:
		if _, ok := l.byConn[c]; ok {
			l.states[c] = state
		}
	}
}
