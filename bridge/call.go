package bridge

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The route of a tools:call. handleCall checks it against the tab's share
// of the session and the limits, registers it with that session (addCall)
// and runs it upstream (session.callTool) on a goroutine of the tab's. The
// session's tap hands the server's progress to routeProgress, which looks
// its token up among that session's calls only; finish sends the call's one
// answer. tools:cancel answers a request in flight and stops it.

// call is one tools:call in flight.
type call struct {
	t       *tab
	s       *session
	id      json.RawMessage // the page's id, echoed byte for byte
	token   string          // the bridge's progress token, unique across tabs
	tool    string
	args    []byte
	timeout time.Duration
	start   time.Time // when the request arrived
	labels  [2]string // the metrics' server and tool labels
	slot    *rawSlot  // the raw outcome upstream; set by the goroutine running the call before callTool

	ctx      context.Context
	cancel   context.CancelFunc // cancelling sends notifications/cancelled upstream
	deadline *time.Timer        // cancels ctx with context.DeadlineExceeded at the timeout; stopped when the result begins to stream

	once   sync.Once // the page gets exactly one answer
	mu     sync.Mutex
	over   bool          // guarded by mu; answered: later progress is dropped
	stream *resultStream // guarded by mu; the result being streamed to the page (stream.go), set once

	// Progress pacing (Options.ProgressInterval). pushMu orders the
	// call's progress and its answer on the tab: it is held from taking a
	// progress to queueing it, and by finish around its answer, so a timed
	// progress never overtakes a later one or the answer.
	pushMu   sync.Mutex
	sentAt   time.Time     // guarded by mu; when the last progress was queued
	held     *progressNote // guarded by mu; the latest progress not yet queued
	holdTime *time.Timer   // guarded by mu; queues held when the interval ends
}

// progressNote is one progress report of a call, as the page will see it.
type progressNote struct {
	progress, total float64
	message         string
}

// finish answers the call once: with raw as the result, or with perr.
func (c *call) finish(raw []byte, perr *protoError) {
	c.once.Do(func() {
		c.pushMu.Lock()
		defer c.pushMu.Unlock()
		c.mu.Lock()
		c.over = true
		st := c.stream
		held := c.held
		c.held = nil
		if c.holdTime != nil {
			c.holdTime.Stop()
			c.holdTime = nil
		}
		c.mu.Unlock()
		if held != nil {
			c.pushNote(held) // the last progress, ahead of the answer
		}
		if st != nil {
			// The result went out in pieces as it was read: its sequence
			// ends now, and an error follows if it was not whole.
			var size int64
			var toolErr bool
			perr, size, toolErr = st.finishStream(perr)
			c.answered(size, toolErr, perr)
			if perr != nil {
				c.t.push(errorReply(typeCall, c.id, perr))
			}
			return
		}
		// Counted and recorded before the page can see the answer: the page
		// may send its next call at once, and that call's record must not
		// overtake this one (the audit file is in the order of answers).
		c.answered(int64(len(raw)), perr == nil && isToolError(raw), perr)
		if perr != nil {
			c.t.push(errorReply(typeCall, c.id, perr))
		} else {
			// The raw result is sent as it is, between the reply's head and its
			// closing brace: no copy of a result of tens of megabytes.
			head := buildMessage(replyHead{Type: typeCall, ID: c.id, OK: true})
			head = append(head[:len(head)-1], `,"result":`...)
			// The result's reservation in the result pool goes with it,
			// until it has left the tab's queue.
			c.t.enqueueMsg(&outMsg{parts: [][]byte{head, raw, {'}'}}, release: c.slot.detach(), result: &heldResult{id: c.id, tool: c.tool}})
		}
	})
}

// answered counts and records the call's one answer: a result of size
// bytes (toolErr: its isError is true), or perr.
func (c *call) answered(size int64, toolErr bool, perr *protoError) {
	outcome, code := outcomeOK, ""
	switch {
	case perr == nil:
		if toolErr {
			outcome = outcomeToolError
		}
	case perr.Code == CodeCancelled:
		outcome = outcomeCancelled
	case perr.Code == CodeTimeout:
		outcome = outcomeTimedOut
	default:
		outcome = outcomeFailed
	}
	if perr != nil {
		code = perr.Code
	}
	elapsed := time.Since(c.start)
	in, out := int64(len(c.args)), size
	b := c.t.b
	b.metrics.callDone(c.labels[0], c.labels[1], outcome, true, elapsed, in, out)
	b.audit(auditRecord{Event: auditCall, User: c.t.adm.User, Server: shown(c.s.spec.Name), Fingerprint: c.s.spec.Fingerprint,
		Tool: shown(c.tool), ArgsSHA256: argsDigest(c.args), Outcome: outcome, Code: code, DurationMs: millis(elapsed),
		BytesIn: in, BytesOut: out, ID: shown(string(c.id)), Tab: c.t.id})
}

// refuseCall answers a tools:call the bridge will not run (unless the
// reply was already sent: pushed false), and counts and records it. s is
// the tab's session with the server, nil when it has none; server and
// tool are the page's words, recorded only in the audit record (bounded).
func (t *tab) refuseCall(m pageMessage, s *session, server, tool string, args []byte, perr *protoError, push bool) {
	if push {
		t.push(errorReply(m.Type, m.ID, perr))
	}
	sl, tl := labelOther, labelOther
	rec := auditRecord{Event: auditCall, User: t.adm.User, Server: shown(server), Tool: shown(tool),
		Outcome: outcomeRefused, Code: perr.Code, ID: shown(string(m.ID)), Tab: t.id}
	if s != nil {
		_, listed := s.currentListing().tools[tool]
		sl, tl = t.b.metrics.labels(s.spec.Name, tool, listed)
		rec.Fingerprint = s.spec.Fingerprint
	}
	if args != nil {
		rec.ArgsSHA256 = argsDigest(args)
	}
	t.b.metrics.callDone(sl, tl, outcomeRefused, false, 0, 0, 0)
	t.b.audit(rec)
}

func (c *call) cancelUpstream() { c.cancel() }

// progress relays one notifications/progress to the call's tab, in place
// of the call's progress still waiting there (tab.pushProgress), at most
// one per Options.ProgressInterval: a report within the interval of the
// last is held (the latest wins) and queued when the interval ends, or
// ahead of the call's answer. Called from the goroutine that reads the
// server, in wire order.
func (c *call) progress(p, total float64, message string) {
	note := &progressNote{p, total, message}
	every := c.t.b.opts.ProgressInterval
	c.mu.Lock()
	if c.over {
		c.mu.Unlock()
		return
	}
	now := time.Now()
	if every > 0 && (c.held != nil || now.Sub(c.sentAt) < every) {
		c.held = note
		if c.holdTime == nil {
			c.holdTime = time.AfterFunc(c.sentAt.Add(every).Sub(now), c.flushHeld)
		}
		c.mu.Unlock()
		return
	}
	c.sentAt = now
	c.mu.Unlock()
	c.pushMu.Lock()
	c.mu.Lock()
	over := c.over // answered meanwhile: the answer went out, and nothing after it
	c.mu.Unlock()
	if !over {
		c.pushNote(note)
	}
	c.pushMu.Unlock()
}

// flushHeld queues the progress held back by the pacing (progress); run
// by its timer.
func (c *call) flushHeld() {
	c.pushMu.Lock()
	defer c.pushMu.Unlock()
	c.mu.Lock()
	note := c.held
	c.held, c.holdTime = nil, nil
	if c.over || note == nil {
		c.mu.Unlock()
		return
	}
	c.sentAt = time.Now()
	c.mu.Unlock()
	c.pushNote(note)
}

// pushNote queues a progress message; the caller holds pushMu.
func (c *call) pushNote(n *progressNote) {
	c.t.pushProgress(idKey(c.id), buildMessage(struct {
		Type     string          `json:"type"`
		ID       json.RawMessage `json:"id"`
		Progress float64         `json:"progress"`
		Total    float64         `json:"total,omitempty"`
		Message  string          `json:"message,omitempty"`
	}{typeProgress, c.id, n.progress, n.total, oneLine(n.message)}))
}

func (t *tab) handleCall(m pageMessage) {
	var req struct {
		Server    *string         `json:"server"`
		Tool      *string         `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
		TimeoutMs *float64        `json:"timeoutMs"`
	}
	start := time.Now()
	if perr := decodeFields(m.Frame, &req); perr != nil {
		t.refuseCall(m, nil, "", "", nil, perr, true)
		return
	}
	server, tool := "", ""
	if req.Server != nil {
		server = *req.Server
	}
	if req.Tool != nil {
		tool = *req.Tool
	}
	switch {
	case server == "":
		t.refuseCall(m, nil, server, tool, nil, errorf(CodeBadRequest, "tools:call needs \"server\""), true)
		return
	case tool == "":
		t.refuseCall(m, nil, server, tool, nil, errorf(CodeBadRequest, "tools:call needs \"tool\""), true)
		return
	case len(req.Arguments) > 0 && req.Arguments[0] != '{' && string(req.Arguments) != "null":
		t.refuseCall(m, nil, server, tool, nil, errorf(CodeBadRequest, "\"arguments\" must be an object"), true)
		return
	case req.TimeoutMs != nil && *req.TimeoutMs <= 0:
		t.refuseCall(m, nil, server, tool, nil, errorf(CodeBadRequest, "\"timeoutMs\" must be a positive number of milliseconds"), true)
		return
	}
	args := []byte(req.Arguments)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	t.mu.Lock()
	s := t.shares[*req.Server]
	closedBy := t.closedBy[*req.Server]
	inFlight := 0
	for _, p := range t.pending {
		if p.server != nil {
			inFlight++
		}
	}
	t.mu.Unlock()
	if s == nil && closedBy != "" {
		t.refuseCall(m, nil, server, tool, args, errorf(CodeNotConnected, "the session with %s ended: %s; connect again", *req.Server, closedBy), true)
		return
	}
	if s == nil {
		t.refuseCall(m, nil, server, tool, args, errorf(CodeNotConnected, "this tab is not connected to %q: send tools:connect first", *req.Server), true)
		return
	}
	if perr := t.stillConfigured(s.spec.Name); perr != nil {
		t.refuseCall(m, s, server, tool, args, perr, true)
		return
	}
	l := s.currentListing()
	info, listed := l.tools[*req.Tool]
	if !listed {
		t.refuseCall(m, s, server, tool, args, errorf(CodeUnknownTool, "%s has no tool named %q", *req.Server, *req.Tool), true)
		return
	}
	if inFlight >= t.b.opts.MaxCallsPerTab {
		t.refuseCall(m, s, server, tool, args, errorf(CodeBusy, "this tab already has %d calls in flight; wait for one to finish", inFlight), true)
		return
	}
	if n := s.callCount(); n >= t.b.opts.MaxCallsPerServer {
		t.refuseCall(m, s, server, tool, args, errorf(CodeBusy, "%s already has %d calls in flight; try again shortly", *req.Server, n), true)
		return
	}
	timeout := durationAtMost(info.expectedSeconds*5, time.Second, t.b.opts.CallTimeoutMax)
	if timeout < 60*time.Second {
		timeout = min(60*time.Second, t.b.opts.CallTimeoutMax)
	}
	if req.TimeoutMs != nil {
		timeout = durationAtMost(*req.TimeoutMs, time.Millisecond, t.b.opts.CallTimeoutMax)
	}
	// The timeout is a timer rather than a deadline: a result that has
	// begun to stream (stream.go) has come within it, however long the
	// page takes to receive it.
	ctx, cancelCause := context.WithCancelCause(t.ctx)
	cancel := func() { cancelCause(context.Canceled) }
	deadline := time.AfterFunc(timeout, func() { cancelCause(context.DeadlineExceeded) })
	c := &call{t: t, s: s, id: m.ID, token: t.b.newToken("mjb-"), tool: *req.Tool, args: args,
		timeout: timeout, ctx: ctx, cancel: cancel, start: start, deadline: deadline}
	c.labels[0], c.labels[1] = t.b.metrics.labels(s.spec.Name, c.tool, true)
	p := &pending{server: s, cancel: func(code, message string) {
		c.finish(nil, errorf(code, "%s", message))
		cancel()
	}}
	if perr := t.addPending(m, p); perr != nil {
		cancel()
		t.refuseCall(m, s, server, tool, args, perr, false)
		return
	}
	if !s.addCall(c) {
		t.removePending(m.ID, p)
		cancel()
		t.refuseCall(m, s, server, tool, args, errorf(CodeNotConnected, "the session with %s has ended: connect again", *req.Server), true)
		return
	}
	t.work.Add(1)
	go func() {
		defer t.work.Done()
		defer cancel()
		defer deadline.Stop()
		c.slot = &rawSlot{call: c}
		if note := s.busyNote(); note != "" {
			c.progress(0, 0, note) // why this call may wait: the server still computes a cancelled one
		}
		raw, perr := s.callTool(ctx, c)
		if ctx.Err() != nil {
			s.noteCancel() // cancelled upstream (the page, the timeout, the tab closing): is the work stopping?
		} else if perr == nil {
			s.callEnded(c.start) // the server got to this call: whatever it was finishing is over
		}
		// The call stops counting (against MaxCallsPerTab and
		// MaxCallsPerServer, and its id as in flight) before the page can
		// see its answer: a page that sends its next call the moment it has
		// the answer must not find this one still counted (50 tabs calling
		// in turn met "64 calls in flight" so).
		s.removeCall(c)
		t.removePending(m.ID, p)
		c.finish(raw, perr)
		// What the queued result did not take of the reservation (an
		// error, or no result) goes back.
		c.slot.close()
	}()
}

// durationAtMost is n units as a Duration, and max when that is longer.
// The comparison is made before converting: a float64 beyond the int64
// range of nanoseconds (timeoutMs: 1e308 is valid JSON) converts to a
// negative Duration, which would time the call out at once.
func durationAtMost(n float64, unit, max time.Duration) time.Duration {
	if !(n < float64(max)/float64(unit)) { // also NaN
		return max
	}
	return time.Duration(n * float64(unit))
}

// stillConfigured refuses a new call on a session whose entry was removed
// from the configuration (or is now excluded by the admin's settings) since
// the tab connected, with the code a connect would get now. The
// configuration is the one read at most Options.ConfigRecheck ago. Calls already
// in flight finish; the tab's share stays until it disconnects or closes.
// An entry whose definition changed is still configured: the tab keeps
// calling the session it connected until it connects again.
func (t *tab) stillConfigured(name string) *protoError {
	_, snap, ok := t.findSpec(name, t.b.opts.ConfigRecheck)
	if ok {
		return nil
	}
	if reason, forbidden := snap.Forbidden[name]; forbidden {
		return errorf(CodeForbidden, "%s", reason)
	}
	return errorf(CodeUnknownServer, "%s was removed from the configuration since this tab connected: list the servers again with tools:servers", name)
}

func (t *tab) handleCancel(m pageMessage) {
	t.mu.Lock()
	p := t.pending[idKey(m.ID)]
	t.mu.Unlock()
	if p != nil {
		p.cancel(CodeCancelled, "cancelled by the page")
	}
	t.push(buildMessage(struct {
		replyHead
		Cancelled bool `json:"cancelled"`
	}{replyHead{Type: m.Type, ID: m.ID, OK: true}, p != nil}))
}

// routeProgress sends a progress notification this session's server sent
// to the tab whose call carries its token. The token is looked up only
// among this session's calls: a server cannot reach a call on another
// server, even with its token. Unknown tokens (late progress after a
// result, another server's call) are dropped. Called by the tap, from the
// goroutine that reads the server, in wire order.
func (s *session) routeProgress(p *mcp.ProgressNotificationParams) {
	if p == nil {
		return
	}
	token, _ := p.ProgressToken.(string)
	s.mu.Lock()
	c := s.calls[token]
	s.mu.Unlock()
	if c == nil {
		return
	}
	c.progress(p.Progress, p.Total, p.Message)
}

// addCall registers c; false if the session has ended.
func (s *session) addCall(c *call) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	s.calls[c.token] = c
	return true
}

func (s *session) removeCall(c *call) {
	s.mu.Lock()
	delete(s.calls, c.token)
	s.mu.Unlock()
	s.tap.forget(c.token)
}

func (s *session) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}
