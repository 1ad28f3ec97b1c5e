package bridge

import (
	"context"
	"errors"
	"sync"
	"time"
)

// pool is the MCP sessions every tab shares: at most one live session per
// server definition (sessionKey), started by the first tab that acquires
// it and stopped once the last share is released (after
// Options.IdleGrace), and the last failure of each server name, for
// tools:servers. It never writes to a page itself: a session that ended on
// its own is handed to each holder's tab.sessionClosed.
type pool struct {
	b *Bridge // set by newPool; the sessions' bridge: its ctx is their parent, its wg counts their run

	// mu guards the fields below and, in each of the pool's sessions,
	// holders, refs, stopping and grace. A session's own mu may be taken
	// under it, never the other way round; no other lock is taken under it.
	mu        sync.Mutex
	closed    bool                // guarded by mu; set by close: acquire refuses
	sessions  map[string]*session // guarded by mu; by sessionKey; live (starting or running) sessions
	lastError map[string]string   // guarded by mu; by server name: the last failure, for tools:servers
	lastTail  map[string][]string // guarded by mu; by server name: the stderr tail at the last failure
}

func newPool(b *Bridge) *pool {
	return &pool{b: b, sessions: map[string]*session{}, lastError: map[string]string{}, lastTail: map[string][]string{}}
}

// close makes acquire refuse from now on (Bridge.Close); the sessions are
// stopped by the bridge's context.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

// get returns the live session with this key, or nil.
func (p *pool) get(key string) *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sessions[key]
}

// acquire gives t a share of the session for spec, starting it if needed.
// A session of the same definition that is stopping is waited for, until
// it is gone or ctx ends, before another is started: whatever tabs do, a
// definition has at most one process running and one stopping (PROTOCOL.md,
// "Bounds"). A session in its idle grace is not stopping: it is reused.
// It returns ctx's error if ctx ended first, errShuttingDown if the bridge
// is closed.
func (p *pool) acquire(ctx context.Context, t *tab, spec ServerSpec) (*session, error) {
	key := sessionKey(spec)
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errShuttingDown
		}
		s := p.sessions[key]
		if s != nil && s.stopping {
			// sessionEnded removes s from p.sessions before done is closed.
			done := s.done
			p.mu.Unlock()
			select {
			case <-done:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if s == nil {
			s = newSession(p.b, spec)
			sctx, cancel := context.WithCancel(p.b.ctx)
			s.cancel = cancel
			p.sessions[key] = s
			p.b.wg.Add(1)
			go func() {
				defer p.b.wg.Done()
				s.run(sctx)
			}()
		}
		if s.grace != nil {
			s.grace.Stop()
			s.grace = nil
		}
		s.refs++
		s.holders[t]++
		p.mu.Unlock()
		return s, nil
	}
}

var errShuttingDown = errors.New("the bridge is shutting down")

// release drops one share of t in s. The last share stops the session, at
// once if it is still starting, else after the grace period.
func (p *pool) release(t *tab, s *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.holders[t] == 0 {
		return
	}
	s.holders[t]--
	if s.holders[t] == 0 {
		delete(s.holders, t)
	}
	s.refs--
	if s.refs > 0 {
		return
	}
	select {
	case <-s.ready:
	default:
		s.stopping = true
		s.stop() // nobody waits for this start any more
		return
	}
	if p.b.opts.IdleGrace < 0 {
		s.stopping = true
		s.stop()
		return
	}
	s.grace = time.AfterFunc(p.b.opts.IdleGrace, func() {
		p.mu.Lock()
		idle := s.refs == 0 && s.grace != nil
		if idle {
			s.stopping = true
		}
		p.mu.Unlock()
		if idle {
			s.stop()
		}
	})
}

// sessionEnded is called by run when a session is over (its tabs were told
// by closeHolders).
func (p *pool) sessionEnded(s *session, reason string, onItsOwn bool) {
	p.mu.Lock()
	if p.sessions[s.key] == s {
		delete(p.sessions, s.key)
	}
	if s.grace != nil {
		s.grace.Stop()
		s.grace = nil
	}
	if onItsOwn || s.startErr != nil {
		p.lastError[s.spec.Name] = reason
		p.lastTail[s.spec.Name] = s.stderrTail(stderrBlockLines)
	}
	p.mu.Unlock()
}

// closeHolders tells every tab holding s that it ended on its own, why
// (tools:closed). Called by run before it answers the session's calls.
func (p *pool) closeHolders(s *session, reason string) {
	p.mu.Lock()
	// A tab told may connect again at once: it must get a new session,
	// not this one (see acquire), whatever the idle grace.
	s.stopping = true
	holders := make([]*tab, 0, len(s.holders))
	for t := range s.holders {
		holders = append(holders, t)
	}
	p.mu.Unlock()
	for _, t := range holders {
		t.sessionClosed(s, reason)
	}
}

// sessionReady forgets the server's last failure: it works now.
func (p *pool) sessionReady(s *session) {
	p.mu.Lock()
	delete(p.lastError, s.spec.Name)
	delete(p.lastTail, s.spec.Name)
	p.mu.Unlock()
}

func sessionKey(spec ServerSpec) string { return spec.Name + "\x00" + spec.Fingerprint }

// views returns specs as tools:servers shows them, with what the pool
// knows of each, read at one instant: the state and holders of its
// definition's session, the stderr tail of a start under way, and the
// failure of a session that failed or, once it is gone, the last failure
// of the name.
func (p *pool) views(specs []ServerSpec) []*serverView {
	views := make([]*serverView, 0, len(specs))
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, spec := range specs {
		v := viewOf(spec)
		if s := p.sessions[sessionKey(spec)]; s != nil {
			v.State = s.state()
			v.Tabs = len(s.holders)
			switch v.State {
			case stateStarting:
				v.Stderr = s.stderrTail(stderrBlockLines)
			case stateFailed:
				// The session failed and run has not yet handed the failure
				// to sessionEnded: report it from the session itself.
				v.LastError = s.failure()
				v.Stderr = s.stderrTail(stderrBlockLines)
			}
		}
		if (v.State == stateStopped || v.State == stateFailed) && v.LastError == "" {
			v.LastError = p.lastError[spec.Name]
			if v.LastError != "" {
				v.State = stateFailed
				v.Stderr = p.lastTail[spec.Name]
			}
		}
		views = append(views, v)
	}
	return views
}
