package bridge

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// tools:connect gives a tab a share of a server's session once the person
// has confirmed the server (or holds an approval for it), relaying its
// stderr as progress while it starts; tools:disconnect gives the share
// back; sessionClosed tells the tab when the session ended on its own.

func (t *tab) handleConnect(m pageMessage) {
	var req struct {
		Server      *string `json:"server"`
		Fingerprint *string `json:"fingerprint"`
		Confirmed   *bool   `json:"confirmed"`
		Approval    *string `json:"approval"`
	}
	start := time.Now()
	if perr := decodeFields(m.Frame, &req); perr != nil {
		t.push(errorReply(m.Type, m.ID, perr))
		t.connectAnswered(m, nil, "", outcomeRefused, perr.Code, start)
		return
	}
	if req.Server == nil || *req.Server == "" {
		perr := errorf(CodeBadRequest, "tools:connect needs \"server\", the name of a configured server")
		t.push(errorReply(m.Type, m.ID, perr))
		t.connectAnswered(m, nil, "", outcomeRefused, perr.Code, start)
		return
	}
	spec, snap, ok := t.findSpec(*req.Server, 0)
	if !ok {
		perr := errorf(CodeUnknownServer, "no server named %q is configured (list them with tools:servers)", *req.Server)
		if reason, forbidden := snap.Forbidden[*req.Server]; forbidden {
			perr = errorf(CodeForbidden, "%s", reason)
		}
		t.push(errorReply(m.Type, m.ID, perr))
		t.connectAnswered(m, nil, *req.Server, outcomeRefused, perr.Code, start)
		return
	}
	if req.Fingerprint == nil || *req.Fingerprint == "" {
		e := errorf(CodeConfirmationRequired, "Confirm %s before its first connection.", spec.Name)
		e.Server = viewOf(spec)
		t.push(errorReply(m.Type, m.ID, e))
		t.connectAnswered(m, &spec, "", outcomeRefused, e.Code, start)
		return
	}
	if *req.Fingerprint != spec.Fingerprint {
		e := errorf(CodeFingerprintChanged, "The configuration of %s changed since it was confirmed: confirm it again.", spec.Name)
		e.Server = viewOf(spec)
		t.push(errorReply(m.Type, m.ID, e))
		t.connectAnswered(m, &spec, "", outcomeRefused, e.Code, start)
		return
	}
	approved := false
	if req.Approval != nil && *req.Approval != "" && t.b.opts.Approvals != nil {
		if err := t.b.opts.Approvals.Check(*req.Approval, t.adm.User, spec.Name, spec.Fingerprint); err == nil {
			approved = true
		} else {
			t.b.log.Info("approval refused", "server", spec.Name, "user", t.adm.User, "error", err)
		}
	}
	if !approved && (req.Confirmed == nil || !*req.Confirmed) {
		e := errorf(CodeConfirmationRequired, "Confirm %s before connecting: its approval is missing, expired or not valid for this user and configuration.", spec.Name)
		e.Server = viewOf(spec)
		t.push(errorReply(m.Type, m.ID, e))
		t.connectAnswered(m, &spec, "", outcomeRefused, e.Code, start)
		return
	}
	if !approved {
		// The person confirmed this server and fingerprint (confirmed: true).
		t.b.audit(auditRecord{Event: auditConfirm, User: t.adm.User, Server: shown(spec.Name), Fingerprint: spec.Fingerprint,
			ID: shown(string(m.ID)), Tab: t.id})
	}
	ctx, cancel := context.WithCancel(t.ctx)
	var once sync.Once
	answered := make(chan struct{})
	answer := func(msg []byte) bool {
		sent := false
		once.Do(func() { t.push(msg); sent = true; close(answered) })
		return sent
	}
	p := &pending{connect: true, cancel: func(code, message string) {
		answer(errorReply(m.Type, m.ID, errorf(code, "%s", message)))
		cancel()
	}}
	if perr := t.addPending(m, p); perr != nil {
		cancel()
		t.connectAnswered(m, &spec, "", outcomeRefused, perr.Code, start)
		return
	}
	t.work.Add(1)
	go func() {
		defer t.work.Done()
		defer cancel()
		defer t.removePending(m.ID, p)
		t.connect(ctx, m, spec, answer, true)
		t.mu.Lock()
		s := t.shares[spec.Name]
		t.mu.Unlock()
		outcome := outcomeFailed
		switch {
		case s != nil && s.spec.Fingerprint == spec.Fingerprint:
			outcome = outcomeOK
		case ctx.Err() != nil:
			outcome = outcomeCancelled
		}
		t.connectAnswered(m, &spec, "", outcome, "", start)
	}()
}

// connectAnswered counts and records a tools:connect's answer: of spec,
// or, when the configuration has no such server, of the page's name
// (recorded only in the audit record, bounded).
func (t *tab) connectAnswered(m pageMessage, spec *ServerSpec, asked, outcome, code string, start time.Time) {
	rec := auditRecord{Event: auditConnect, User: t.adm.User, Server: shown(asked), Outcome: outcome, Code: code,
		DurationMs: millis(time.Since(start)), ID: shown(string(m.ID)), Tab: t.id}
	server := labelOther
	if spec != nil {
		server = t.b.metrics.server(spec.Name)
		rec.Server, rec.Fingerprint = spec.Name, spec.Fingerprint
	}
	t.b.metrics.connects.WithLabelValues(server, outcome).Inc()
	t.b.audit(rec)
}

// startProgressEvery is the shortest interval between two tools:progress
// messages of a connect waiting for a server's start.
const startProgressEvery = 100 * time.Millisecond

// connect runs one tools:connect: acquire the session, wait for its start
// (relaying stderr as progress), make sure a running session's server still
// answers (session.alive), then answer with the listing. When it does not,
// the session ends and, if again, a new one is started in its place.
func (t *tab) connect(ctx context.Context, m pageMessage, spec ServerSpec, answer func([]byte) bool, again bool) {
	// A tab holds at most one share per server name: a connect to a new
	// definition of the same name releases the old one.
	t.mu.Lock()
	old := t.shares[spec.Name]
	if old != nil {
		delete(t.shares, spec.Name)
	}
	t.mu.Unlock()
	s, err := t.b.pool.acquire(ctx, t, spec)
	if old != nil {
		t.b.pool.release(t, old)
	}
	if err != nil {
		if ctx.Err() == nil {
			answer(errorReply(m.Type, m.ID, errorf(CodeServerFailed, "%s", err.Error())))
		} // else answered by whoever cancelled
		return
	}
	// Start progress carries the latest stderr line, at most one message
	// every startProgressEvery: a server that floods stderr while it starts
	// must not fill the tab's queue (which would close the tab with 4408).
	var lineMu sync.Mutex
	latest := "" // guarded by lineMu
	kick := make(chan struct{}, 1)
	unwatch := s.watch(func(line string) {
		lineMu.Lock()
		latest = line
		lineMu.Unlock()
		select {
		case kick <- struct{}{}:
		default: // a message is already due: it will carry this line
		}
	})
	throttle := time.NewTimer(0)
	defer throttle.Stop()
wait:
	for {
		select {
		case <-s.ready:
			break wait
		case <-ctx.Done():
			break wait
		case <-kick:
		}
		select {
		case <-s.ready:
			break wait
		case <-ctx.Done():
			break wait
		case <-throttle.C:
		}
		lineMu.Lock()
		line := latest
		lineMu.Unlock()
		t.push(buildMessage(struct {
			Type    string          `json:"type"`
			ID      json.RawMessage `json:"id"`
			Message string          `json:"message"`
			Stderr  []string        `json:"stderr,omitempty"`
		}{typeProgress, m.ID, oneLine(line), s.stderrTail(stderrBlockLines)}))
		throttle.Reset(startProgressEvery)
	}
	unwatch()
	if ctx.Err() != nil {
		t.b.pool.release(t, s)
		return // answered by whoever cancelled
	}
	if s.startErr != nil {
		t.b.pool.release(t, s)
		e := errorf(CodeServerFailed, "%s", s.startErr.Error())
		e.Stderr = s.stderrTail(stderrBlockLines)
		answer(errorReply(m.Type, m.ID, e))
		return
	}
	if s.state() != stateConnected {
		t.b.pool.release(t, s)
		answer(errorReply(m.Type, m.ID, errorf(CodeServerFailed, "the session with %s ended as it was joined: connect again", spec.Name)))
		return
	}
	if !s.alive(ctx) {
		// The server stopped answering: its session ends (and its other
		// tabs are told); this connect starts a new one.
		select {
		case <-s.done:
		case <-ctx.Done():
		}
		t.b.pool.release(t, s)
		if ctx.Err() != nil {
			return // answered by whoever cancelled
		}
		if again {
			t.connect(ctx, m, spec, answer, false)
			return
		}
		answer(errorReply(m.Type, m.ID, errorf(CodeServerFailed, "%s stopped answering twice in a row: connect again later", spec.Name)))
		return
	}
	l := s.currentListing()
	var approval string
	if t.b.opts.Approvals != nil {
		a, err := t.b.opts.Approvals.Issue(t.adm.User, spec.Name, spec.Fingerprint)
		if err != nil {
			t.b.log.Error("cannot sign an approval", "server", spec.Name, "error", err)
		} else {
			approval = a
		}
	}
	t.mu.Lock()
	if t.ctx.Err() != nil {
		t.mu.Unlock()
		t.b.pool.release(t, s)
		return
	}
	t.shares[spec.Name] = s
	delete(t.closedBy, spec.Name)
	t.mu.Unlock()
	if !answer(buildMessage(struct {
		replyHead
		Server          string `json:"server"`
		Fingerprint     string `json:"fingerprint"`
		ProtocolVersion string `json:"protocolVersion"`
		Approval        string `json:"approval,omitempty"`
	}{replyHead{Type: m.Type, ID: m.ID, OK: true}, spec.Name, spec.Fingerprint, s.protocolVersion, approval},
		s.selfFields(listingFields(l)...)...)) {
		// Cancelled between the start and the answer: give the share back.
		t.mu.Lock()
		if t.shares[spec.Name] == s {
			delete(t.shares, spec.Name)
		}
		t.mu.Unlock()
		t.b.pool.release(t, s)
	}
}

// sessionClosed is called when a session this tab holds ended on its own.
func (t *tab) sessionClosed(s *session, reason string) {
	t.mu.Lock()
	held := t.shares[s.spec.Name] == s
	if held {
		delete(t.shares, s.spec.Name)
		if t.closedBy == nil {
			t.closedBy = map[string]string{}
		}
		t.closedBy[s.spec.Name] = oneLine(reason)
	}
	t.mu.Unlock()
	if !held {
		return
	}
	t.b.pool.release(t, s)
	t.push(buildMessage(struct {
		Type    string `json:"type"`
		Server  string `json:"server"`
		Message string `json:"message"`
	}{typeClosed, s.spec.Name, oneLine(reason)}))
}

func (t *tab) handleDisconnect(m pageMessage) {
	var req struct {
		Server *string `json:"server"`
	}
	if perr := decodeFields(m.Frame, &req); perr != nil {
		t.push(errorReply(m.Type, m.ID, perr))
		return
	}
	if req.Server == nil || *req.Server == "" {
		t.push(errorReply(m.Type, m.ID, errorf(CodeBadRequest, "tools:disconnect needs \"server\"")))
		return
	}
	t.mu.Lock()
	s := t.shares[*req.Server]
	delete(t.shares, *req.Server)
	delete(t.closedBy, *req.Server)
	var toCancel []*pending
	if s != nil {
		for _, p := range t.pending {
			if p.server == s {
				toCancel = append(toCancel, p)
			}
		}
	}
	t.mu.Unlock()
	if s == nil {
		t.push(errorReply(m.Type, m.ID, errorf(CodeNotConnected, "this tab is not connected to %q", *req.Server)))
		return
	}
	for _, p := range toCancel {
		p.cancel(CodeCancelled, "the page disconnected from the server")
	}
	t.b.pool.release(t, s)
	t.push(buildMessage(struct {
		replyHead
		Server string `json:"server"`
	}{replyHead{Type: m.Type, ID: m.ID, OK: true}, *req.Server}))
}
