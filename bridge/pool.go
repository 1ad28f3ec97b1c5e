package bridge

import (
	"context"
	"errors"
	"time"
)

// acquire gives t a share of the session for spec, starting it if needed.
// A session of the same definition that is stopping is waited for, until
// it is gone or ctx ends, before another is started: whatever tabs do, a
// definition has at most one process running and one stopping (PROTOCOL.md,
// "Bounds"). A session in its idle grace is not stopping: it is reused.
// It returns ctx's error if ctx ended first, errShuttingDown if the bridge
// is closed.
func (b *Bridge) acquire(ctx context.Context, t *tab, spec ServerSpec) (*session, error) {
	key := sessionKey(spec)
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return nil, errShuttingDown
		}
		s := b.sessions[key]
		if s != nil && s.stopping {
			// sessionEnded removes s from b.sessions before done is closed.
			done := s.done
			b.mu.Unlock()
			select {
			case <-done:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if s == nil {
			s = newSession(b, spec)
			sctx, cancel := context.WithCancel(b.ctx)
			s.cancel = cancel
			b.sessions[key] = s
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				s.run(sctx)
			}()
		}
		if s.grace != nil {
			s.grace.Stop()
			s.grace = nil
		}
		s.refs++
		s.holders[t]++
		b.mu.Unlock()
		return s, nil
	}
}

var errShuttingDown = errors.New("the bridge is shutting down")

// release drops one share of t in s. The last share stops the session, at
// once if it is still starting, else after the grace period.
func (b *Bridge) release(t *tab, s *session) {
	b.mu.Lock()
	defer b.mu.Unlock()
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
	if b.opts.IdleGrace < 0 {
		s.stopping = true
		s.stop()
		return
	}
	s.grace = time.AfterFunc(b.opts.IdleGrace, func() {
		b.mu.Lock()
		idle := s.refs == 0 && s.grace != nil
		if idle {
			s.stopping = true
		}
		b.mu.Unlock()
		if idle {
			s.stop()
		}
	})
}

// sessionEnded is called by run when a session is over. A session that ended
// on its own tells every tab that held it.
func (b *Bridge) sessionEnded(s *session, reason string, onItsOwn bool) {
	b.mu.Lock()
	if b.sessions[s.key] == s {
		delete(b.sessions, s.key)
	}
	if s.grace != nil {
		s.grace.Stop()
		s.grace = nil
	}
	if onItsOwn || s.startErr != nil {
		b.lastError[s.spec.Name] = reason
		b.lastTail[s.spec.Name] = s.stderrTail(5)
	}
	holders := make([]*tab, 0, len(s.holders))
	for t := range s.holders {
		holders = append(holders, t)
	}
	b.mu.Unlock()
	if !onItsOwn {
		return
	}
	for _, t := range holders {
		t.sessionClosed(s, reason)
	}
}

// sessionReady forgets the server's last failure: it works now.
func (b *Bridge) sessionReady(s *session) {
	b.mu.Lock()
	delete(b.lastError, s.spec.Name)
	delete(b.lastTail, s.spec.Name)
	b.mu.Unlock()
}

func sessionKey(spec ServerSpec) string { return spec.Name + "\x00" + spec.Fingerprint }
