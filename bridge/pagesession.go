package bridge

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/gorilla/websocket"
)

// Page sessions. A page that says "resume" in its first message
// (tools:hello) gets a page session: a token, and a sequence number on
// every message the bridge sends it. When its socket drops (a proxy
// restarted, a laptop slept), the tab does not end: its calls go on, what
// they send is kept for the page (bounded: Options.AwayMemory, MaxAway,
// MaxAwayPerUser), and a socket of the same person, from the same Origin,
// that presents the token within Options.ResumeGrace takes the tab over:
// it is sent every message the page has not acknowledged (tools:ack) or
// said it has (its last seq), the latest progress of each call still
// running, then what comes next. The page's code sees each message once
// (it drops a seq it has seen). When the grace ends, the tab ends as a
// closed tab does today: its calls are cancelled and what it held freed.
//
// One goroutine owns a tab's whole life (serve): it runs each socket in
// turn and waits between them (waitAway). The socket that resumes a tab
// arrives as another tab, whose read loop reads the tools:hello, claims
// the away tab (claim, under Bridge.mu), stops its own write loop and hands
// the socket over on attachCh (takeOver).

// The messages of page sessions.
const (
	typeHello = "tools:hello" // the page's first message: the features it supports
	typeAck   = "tools:ack"   // the page has every message up to n
)

// Features a page may ask for in tools:hello. The bridge grants those it
// has and is configured for; a page that sends no tools:hello gets none.
const (
	featureResume = "resume"
	featureBinary = "binary" // the data of the bridge's chunk sequences in binary frames (binaryChunks)
	// featureStream (stream.go): results streamed as they are read; granted with binary only.
)

// attachment is a socket handed to an away tab.
type attachment struct {
	tab  *tab            // the away tab the socket resumes
	conn *websocket.Conn // set by the handing tab's serve
	seq  uint64          // the last sequence number the page has
	id   json.RawMessage // the tools:hello's id, echoed by the reply
	// binary: the new socket's page asked for binary chunk frames (a page
	// may come back as another version of itself).
	binary bool
}

// heldResult marks a queued call result, so that it can be dropped (and
// replaced by an error saying so) while its page is away.
type heldResult struct {
	id   json.RawMessage
	tool string
}

// helloReply answers tools:hello.
type helloReply struct {
	replyHead
	Protocol int           `json:"protocol"`
	Features []string      `json:"features"`
	Session  *helloSession `json:"session,omitempty"`
	Resumed  bool          `json:"resumed,omitempty"`
	Received *uint64       `json:"received,omitempty"`
}

type helloSession struct {
	Token   string `json:"token"`
	GraceMs int64  `json:"graceMs"`
}

// pageKey is the key of a token in Bridge.sessions: its hash, so that
// looking a token up compares no secret.
func pageKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func newSessionToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "ps_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// countReceived counts one page message handled (tools:hello and
// tools:ack are not counted): a resumed page learns from the count which
// of its messages the bridge never read, and sends those again.
func (t *tab) countReceived(typ string) {
	if typ != typeHello {
		t.received++
	}
}

func (t *tab) helloMessage(id json.RawMessage, features []string, resumed bool) []byte {
	r := helloReply{replyHead: replyHead{Type: typeHello, ID: id, OK: true}, Protocol: ProtocolVersion, Features: features}
	if t.resumable.Load() {
		r.Session = &helloSession{Token: t.token, GraceMs: t.b.opts.ResumeGrace.Milliseconds()}
	}
	if resumed {
		n := t.received
		r.Resumed, r.Received = true, &n
	}
	return buildMessage(r)
}

// handleHello answers tools:hello: grants features, opens a page session,
// or claims the away tab whose token the page presents.
func (t *tab) handleHello(m pageMessage) {
	if t.helloOver {
		t.push(errorReply(m.Type, m.ID, errorf(CodeBadRequest, "tools:hello must be the first message on a socket")))
		return
	}
	var req struct {
		Features []string `json:"features"`
		Resume   *struct {
			Token *string `json:"token"`
			N     *uint64 `json:"n"`
		} `json:"resume"`
	}
	if perr := decodeFields(m.Frame, &req); perr != nil {
		t.push(errorReply(m.Type, m.ID, perr))
		return
	}
	granted := []string{}
	resume := slices.Contains(req.Features, featureResume) && t.b.opts.ResumeGrace > 0
	if resume {
		granted = append(granted, featureResume)
	}
	binary := slices.Contains(req.Features, featureBinary)
	if binary {
		granted = append(granted, featureBinary)
	}
	stream := binary && slices.Contains(req.Features, featureStream)
	if stream && req.Resume == nil {
		granted = append(granted, featureStream)
	}
	if req.Resume != nil {
		if !resume {
			t.push(errorReply(m.Type, m.ID, errorf(CodeBadRequest, "\"resume\" needs the feature \"resume\" in \"features\"")))
			return
		}
		if req.Resume.Token == nil || req.Resume.N == nil {
			t.push(errorReply(m.Type, m.ID, errorf(CodeBadRequest, "\"resume\" needs \"token\" (a string) and \"n\" (the number of the last message the page has, 0 for none)")))
			return
		}
		ot, perr := t.b.claim(t, *req.Resume.Token, *req.Resume.N)
		if perr != nil {
			t.b.metrics.resumeRefused(perr.Code)
			t.b.audit(auditRecord{Event: auditResume, User: t.adm.User, Outcome: outcomeRefused, Code: perr.Code, Tab: t.id})
			t.b.log.Info("resume refused", "tab", t.id, "user", t.adm.User, "code", perr.Code)
			t.push(errorReply(m.Type, m.ID, perr))
			return // the page may say hello again, without resume
		}
		t.helloOver = true
		t.handoff = &attachment{tab: ot, seq: *req.Resume.N, id: m.ID, binary: binary}
		return
	}
	t.helloOver = true
	t.binary.Store(binary)
	t.streams.Store(stream)
	if resume {
		t.attachCh = make(chan attachment)
		t.finished = make(chan struct{})
		t.lastProg = map[string]*outMsg{}
		t.token = newSessionToken()
		t.b.mu.Lock()
		t.b.sessions[pageKey(t.token)] = t
		t.b.mu.Unlock()
		t.resumable.Store(true)
	}
	t.enqueueMsg(&outMsg{parts: [][]byte{t.helloMessage(m.ID, granted, false)}, plain: true})
}

// claim finds the away tab of token for the socket of nt and marks it
// claimed. It is refused, without saying whether the token exists, when no
// page session of this person from this Origin has it; and when its socket
// is still open (or another socket is resuming it).
func (b *Bridge) claim(nt *tab, token string, seq uint64) (*tab, *protoError) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ot := b.sessions[pageKey(token)]
	if ot == nil || ot.ended || ot.adm.User != nt.adm.User || ot.origin != nt.origin {
		return nil, errorf(CodeSessionUnknown, "this page session cannot be resumed: it has ended (the bridge keeps one %s after its socket drops) or it is not this sign-in's; whatever its calls did is lost: run them again", b.opts.ResumeGrace)
	}
	if !ot.away.Load() || ot.claimed {
		return nil, errorf(CodeSessionInUse, "this page session is still open on another socket: the bridge drops a silent socket after %s; try again then", b.opts.PongTimeout)
	}
	if last := ot.seq.Load(); seq > last {
		return nil, errorf(CodeBadRequest, "message %d was never sent in this page session (its last is %d)", seq, last)
	}
	ot.claimed = true
	return ot, nil
}

// takeOver hands the socket of a to t, the away tab it claimed; called by
// the socket's first tab once its write loop has stopped. A tab that ended
// meanwhile refuses it.
func (t *tab) takeOver(a attachment) {
	select {
	case t.attachCh <- a:
	case <-t.finished:
		perr := errorf(CodeSessionUnknown, "this page session ended while the page was resuming it; whatever its calls did is lost: run them again")
		_ = a.conn.SetWriteDeadline(time.Now().Add(time.Second))
		_ = a.conn.WriteMessage(websocket.TextMessage, errorReply(typeHello, a.id, perr))
		_ = a.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(CloseNormal, ""), time.Now().Add(time.Second))
		a.conn.Close()
	}
}

// waitAway waits, on the tab's goroutine, for a socket that resumes the
// tab, and returns it; nil when the grace ends or the tab is closed.
func (t *tab) waitAway() *websocket.Conn {
	b := t.b
	b.mu.Lock()
	t.awaySince = time.Now()
	t.away.Store(true)
	b.mu.Unlock()
	b.log.Info("page away: its calls go on", "tab", t.id, "user", t.adm.User, "grace", b.opts.ResumeGrace)
	b.boundAway(t)
	b.trimAway()
	timer := time.NewTimer(b.opts.ResumeGrace)
	defer timer.Stop()
	expire := timer.C
	for {
		select {
		case a := <-t.attachCh:
			t.resume(a)
			return a.conn
		case <-t.done:
			return nil
		case <-expire:
			b.mu.Lock()
			if t.claimed {
				b.mu.Unlock()
				expire = nil // the socket is on its way
				continue
			}
			t.ended = true
			b.mu.Unlock()
			b.metrics.pageEnded("grace")
			b.log.Info("page did not come back: its calls are cancelled", "tab", t.id, "user", t.adm.User, "grace", b.opts.ResumeGrace)
			return nil
		}
	}
}

// resume prepares the tab for the socket of a: acknowledges what the page
// has, and queues, ahead of anything else, the tools:hello reply, every
// message the page has not acknowledged and the last progress of each
// call still running that it has not seen, in their order.
func (t *tab) resume(a attachment) {
	b := t.b
	t.ack(a.seq)
	t.mu.Lock()
	running := make(map[string]bool, len(t.pending))
	for k := range t.pending {
		running[k] = true
	}
	t.mu.Unlock()
	// A session that streams keeps streaming (a stream may be half sent),
	// and so keeps the binary frames streams need.
	binary := a.binary || t.streams.Load()
	t.binary.Store(binary)
	features := []string{featureResume}
	if binary {
		features = append(features, featureBinary)
	}
	if t.streams.Load() {
		features = append(features, featureStream)
	}
	reply := &outMsg{parts: [][]byte{t.helloMessage(a.id, features, true)}, plain: true}
	reply.n = msgSize(reply.parts) + queueOverhead
	t.qmu.Lock()
	resend := t.held
	t.held, t.heldBytes = nil, 0
	for key, m := range t.lastProg {
		if m.seq > a.seq && running[key] && t.latest[key] == nil {
			c := &outMsg{parts: m.parts, n: m.n, key: key, seq: m.seq}
			t.queued += c.n
			b.queued.Add(c.n)
			resend = append(resend, c)
		}
	}
	t.lastProg = map[string]*outMsg{}
	sort.Slice(resend, func(i, j int) bool { return resend[i].seq < resend[j].seq })
	q := make([]*outMsg, 0, 1+len(resend)+len(t.queue))
	q = append(q, reply)
	q = append(q, resend...)
	t.queue = append(q, t.queue...)
	t.queued += reply.n
	b.queued.Add(reply.n)
	if t.behind.IsZero() {
		t.behind = time.Now()
	}
	n := len(resend)
	t.qmu.Unlock()
	b.mu.Lock()
	t.away.Store(false)
	t.claimed = false
	away := time.Since(t.awaySince)
	b.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
	b.metrics.resumes.Inc()
	b.audit(auditRecord{Event: auditResume, User: t.adm.User, Outcome: outcomeOK, Tab: t.id, DurationMs: float64(away.Microseconds()) / 1000})
	b.log.Info("page resumed", "tab", t.id, "user", t.adm.User, "away", away.Round(time.Millisecond), "resent", n, "page_seq", a.seq)
}

// sequence gives m its sequence number (on a resumable tab) and returns
// the parts to write: `{"n":N,` ahead of the message's own fields.
// Called by the write loop.
func (t *tab) sequence(m *outMsg) [][]byte {
	if m.bin {
		// A streamed piece: its number leads its binary frame.
		if !t.resumable.Load() {
			return m.parts
		}
		if m.seq == 0 {
			m.seq = t.seq.Add(1)
		}
		return [][]byte{binaryFrame(m.seq, m.parts[0])}
	}
	if !t.resumable.Load() || m.plain || len(m.parts) == 0 || len(m.parts[0]) == 0 || m.parts[0][0] != '{' {
		return m.parts
	}
	if m.seq == 0 {
		m.seq = t.seq.Add(1)
	}
	head := strconv.AppendUint(append(make([]byte, 0, 32), `{"n":`...), m.seq, 10)
	head = append(head, ',')
	wire := make([][]byte, 0, len(m.parts)+1)
	wire = append(wire, head, m.parts[0][1:])
	return append(wire, m.parts[1:]...)
}

// keep holds a sequenced message the write loop has sent (or failed to)
// until the page acknowledges it; it reports whether it did. The last
// progress of each call is remembered apart, uncounted. Called by the
// write loop.
func (t *tab) keep(m *outMsg) bool {
	if !t.resumable.Load() || m.plain || m.seq == 0 {
		return false
	}
	t.qmu.Lock()
	defer t.qmu.Unlock()
	if t.qclosed {
		return false
	}
	if m.key != "" {
		t.lastProg[m.key] = &outMsg{parts: m.parts, key: m.key, seq: m.seq, n: m.n}
		return false
	}
	t.held = append(t.held, m)
	t.heldBytes += m.n
	if t.queued == t.heldBytes {
		t.behind = time.Time{}
	}
	return true
}

// ack frees what the page has: every held message up to seq.
func (t *tab) ack(seq uint64) {
	t.qmu.Lock()
	if t.qclosed {
		t.qmu.Unlock()
		return
	}
	i := 0
	for i < len(t.held) && t.held[i].seq <= seq {
		i++
	}
	gone := t.held[:i:i]
	t.held = slices.Clone(t.held[i:])
	for _, m := range gone {
		t.heldBytes -= m.n
		t.queued -= m.n
		t.b.queued.Add(-m.n)
	}
	if t.queued == t.heldBytes {
		t.behind = time.Time{}
	}
	t.wakeWaiter()
	for k, m := range t.lastProg {
		if m.seq <= seq {
			delete(t.lastProg, k)
		}
	}
	t.qmu.Unlock()
	var freed int64
	for _, m := range gone {
		freed += msgSize(m.parts)
		m.parts = nil
		m.done()
	}
	// Handing memory back takes a while after a large message: the write
	// loop does it, so that the read loop reads the page's next request
	// at once.
	if t.b.opts.ReleaseAfter >= 0 && freed >= t.b.opts.ReleaseAfter {
		t.freeDue.Store(true)
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// handleAck reads tools:ack {n}: no id, no reply.
func (t *tab) handleAck(frame []byte) {
	var req struct {
		N *uint64 `json:"n"`
	}
	if perr := decodeFields(frame, &req); perr != nil {
		t.push(errorReply(typeAck, nil, perr))
		return
	}
	switch {
	case !t.resumable.Load():
		t.push(errorReply(typeAck, nil, errorf(CodeBadRequest, "tools:ack needs a page session: send tools:hello with the feature \"resume\" first")))
	case req.N == nil:
		t.push(errorReply(typeAck, nil, errorf(CodeBadRequest, "tools:ack needs \"n\", the number of the last message the page has")))
	case *req.N > t.seq.Load():
		t.push(errorReply(typeAck, nil, errorf(CodeBadRequest, "tools:ack of message %d, which was never sent", *req.N)))
	default:
		t.ack(*req.N)
	}
}

// forgetSession ends t's page session (its token resumes nothing more).
func (b *Bridge) forgetSession(t *tab) {
	b.mu.Lock()
	t.ended = true
	if t.token != "" {
		delete(b.sessions, pageKey(t.token))
	}
	b.mu.Unlock()
}

// awayTabs returns the tabs away now (not ended, not being resumed),
// the one away longest first.
func (b *Bridge) awayTabs(user *string) []*tab {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*tab
	for _, t := range b.sessions {
		if t.away.Load() && !t.ended && !t.claimed && (user == nil || t.adm.User == *user) {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].awaySince.Before(out[j].awaySince) })
	return out
}

// endAway ends an away tab's page session now, as when its grace ends.
func (t *tab) endAway(why, reason string) {
	t.b.mu.Lock()
	if t.ended || t.claimed {
		t.b.mu.Unlock()
		return
	}
	t.ended = true
	t.b.mu.Unlock()
	t.b.metrics.pageEnded(why)
	t.b.log.Warn("page session ended while its page was away", "tab", t.id, "user", t.adm.User, "reason", reason)
	t.closeWith(CloseNormal, reason)
}

// boundAway ends the page sessions away longest while more than
// MaxAwayPerUser of t's user, or more than MaxAway in all, are away.
func (b *Bridge) boundAway(t *tab) {
	for {
		user := t.adm.User
		mine := b.awayTabs(&user)
		if len(mine) > b.opts.MaxAwayPerUser {
			mine[0].endAway("bound", "more pages of this user were away than max_away_per_user allows")
			continue
		}
		all := b.awayTabs(nil)
		if len(all) > b.opts.MaxAway {
			all[0].endAway("bound", "more pages were away than max_away allows")
			continue
		}
		return
	}
}

// trimAway keeps the bytes held for away pages within AwayMemory: it
// replaces their results, the oldest first in the page away longest, by
// a dropped error; when none is left to replace, the page session away
// longest ends.
func (b *Bridge) trimAway() {
	b.awayMu.Lock()
	defer b.awayMu.Unlock()
	for {
		tabs := b.awayTabs(nil)
		var total int64
		for _, t := range tabs {
			total += t.queuedBytes()
		}
		if total <= b.opts.AwayMemory || len(tabs) == 0 {
			return
		}
		dropped := false
		for _, t := range tabs {
			if t.dropResults(0) {
				dropped = true
				break
			}
		}
		if !dropped {
			tabs[0].endAway("bound", "the bridge held more for pages away than away_memory allows")
			tabs[0].endQueue()
		}
	}
}

func (t *tab) queuedBytes() int64 {
	t.qmu.Lock()
	defer t.qmu.Unlock()
	return t.queued
}

// droppedMin is the smallest result worth dropping: the error replacing
// it is smaller.
const droppedMin = 4 << 10

// dropResults replaces results held or queued for the away tab by a
// dropped error, the oldest first: one when need is 0, else until a
// message of need bytes fits the tab's OutboundBytes. It reports whether
// it replaced any.
func (t *tab) dropResults(need int64) bool {
	var releases []func()
	var partsGone [][][]byte
	t.qmu.Lock()
	replaced := false
	for li, list := range [][]*outMsg{t.held, t.queue} {
		inHeld := li == 0
		for _, m := range list {
			if need > 0 && t.queued+need <= t.b.opts.OutboundBytes || need == 0 && replaced {
				break
			}
			if m.result == nil || m.n < droppedMin {
				continue
			}
			size, tool := msgSize(m.parts), m.result.tool
			msg := errorReply(typeCall, m.result.id, errorf(CodeDropped, "the result of %s (%s) came while this page was away, and the bridge dropped it to stay within what it holds for pages away (%s): run it again", tool, mib(size), mib(t.b.opts.AwayMemory)))
			n := int64(len(msg)) + queueOverhead
			delta := n - m.n
			t.queued += delta
			t.b.queued.Add(delta)
			if inHeld {
				t.heldBytes += delta
			}
			partsGone = append(partsGone, m.parts)
			m.parts, m.n, m.result = [][]byte{msg}, n, nil
			if m.release != nil {
				releases = append(releases, m.release)
				m.release = nil
			}
			replaced = true
			t.b.metrics.outcomesDropped.Inc()
			t.b.log.Warn("result dropped while its page was away", "tab", t.id, "user", t.adm.User, "tool", tool, "bytes", size)
		}
	}
	t.qmu.Unlock()
	for _, r := range releases {
		r()
	}
	for _, p := range partsGone {
		t.b.releaseMemory(p)
	}
	return replaced
}

// heldTotals counts the messages held for pages with a page session:
// sent and not acknowledged, and, for a page away, not sent yet either.
func (b *Bridge) heldTotals() (n int, bytes int64) {
	b.mu.Lock()
	tabs := make([]*tab, 0, len(b.sessions))
	for _, t := range b.sessions {
		tabs = append(tabs, t)
	}
	b.mu.Unlock()
	for _, t := range tabs {
		t.qmu.Lock()
		n += len(t.held)
		bytes += t.heldBytes
		if t.away.Load() {
			n += len(t.queue)
			bytes += t.queued - t.heldBytes
		}
		t.qmu.Unlock()
	}
	return n, bytes
}
