package bridge_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// cutProxy is a TCP relay between pages and the bridge that a test cuts,
// as a restarting proxy, an ingress's idle timeout or a sleeping laptop
// does: both sides of every connection through it close at once, with no
// close frame.
type cutProxy struct {
	ln      net.Listener
	backend string

	mu    sync.Mutex
	conns []net.Conn // guarded by mu; both ends of every relayed connection
	down  atomic.Int64
	wg    sync.WaitGroup
}

func newCutProxy(t testing.TB, backend string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, backend: backend}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", backend)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); io.Copy(s, c); s.Close(); c.Close() }()
			go func() {
				defer p.wg.Done()
				buf := make([]byte, 32<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						p.down.Add(int64(n))
						if _, werr := c.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				s.Close()
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.cut(); p.wg.Wait() })
	return p
}

// cut closes every connection through the proxy.
func (p *cutProxy) cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (p *cutProxy) wsURL() string { return "ws://" + p.ln.Addr().String() + "/megane/builder-tools/ws" }

// resPage is a page with a page session: it says hello with "resume",
// keeps the last sequence number it has seen, acknowledges, and delivers
// each sequenced message once, as builder-tools-client.js does.
type resPage struct {
	t       testing.TB
	p       *bridgetest.Page
	token   string
	last    uint64
	seen    int               // messages of p already looked at
	outcome []*bridgetest.Msg // every sequenced message delivered, in order, across sockets
}

func seqOf(m *bridgetest.Msg) uint64 {
	var n uint64
	_ = json.Unmarshal(m.Fields["n"], &n)
	return n
}

// hello opens a socket through url and says hello (resuming the page
// session when the page has one); it returns the hello reply.
func (r *resPage) hello(ctx context.Context, url string, header http.Header) *bridgetest.Msg {
	r.t.Helper()
	p, _, err := bridgetest.Dial(ctx, url, header)
	if err != nil {
		r.t.Fatalf("dial: %v", err)
	}
	r.t.Cleanup(func() { p.Close() })
	r.p, r.seen = p, 0
	req := map[string]any{"type": "tools:hello", "id": "h", "features": []string{"resume", "someday"}}
	if r.token != "" {
		req["resume"] = map[string]any{"token": r.token, "n": r.last}
	}
	reply, err := p.Request(ctx, req)
	if err != nil {
		r.t.Fatalf("hello: %v", err)
	}
	if reply.OK != nil && *reply.OK && r.token == "" {
		var s struct{ Token string }
		_ = json.Unmarshal(reply.Fields["session"], &s)
		r.token = s.Token
	}
	return reply
}

// pump delivers the sequenced messages received since the last pump, once
// each, and acknowledges them.
func (r *resPage) pump() {
	all := r.p.All()
	for _, m := range all[r.seen:] {
		if n := seqOf(m); n > r.last {
			r.outcome = append(r.outcome, m)
			r.last = n
		}
	}
	if len(all) > r.seen {
		_ = r.p.Send(map[string]any{"type": "tools:ack", "n": r.last})
	}
	r.seen = len(all)
}

// await pumps until a delivered message matches.
func (r *resPage) await(ctx context.Context, match func(*bridgetest.Msg) bool) *bridgetest.Msg {
	r.t.Helper()
	for {
		r.pump()
		for _, m := range r.outcome {
			if match(m) {
				return m
			}
		}
		select {
		case <-ctx.Done():
			r.t.Fatalf("no such message; delivered: %d, socket: %v", len(r.outcome), r.p.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func isReply(typ string, id any) func(*bridgetest.Msg) bool {
	want, _ := json.Marshal(id)
	return func(m *bridgetest.Msg) bool { return m.Type == typ && string(m.ID) == string(want) && m.OK != nil }
}

// replies counts the delivered replies of type typ to id.
func (r *resPage) replies(typ string, id any) int {
	n := 0
	for _, m := range r.outcome {
		if isReply(typ, id)(m) {
			n++
		}
	}
	return n
}

func resultHash(t testing.TB, m *bridgetest.Msg) string {
	t.Helper()
	raw := m.Fields["result"]
	if raw == nil {
		t.Fatalf("no result: %.300s", m.Raw)
	}
	return fmt.Sprintf("%x (%d bytes)", sha256.Sum256(raw), len(raw))
}

// TestResumeAfterCut cuts the page's connection mid-call, at the moments a
// proxy restart or a sleeping laptop can: while progress flows, in the
// middle of a 40 MB result's chunk frames, and between two of them. The
// page comes back through the proxy and gets every outcome once, the
// result byte for byte as an uncut call gets it, and the call is not run
// twice.
func TestResumeAfterCut(t *testing.T) {
	jpath := journal(t)
	spec := fakeServer(t, "lab", bridgetest.Mode{Journal: jpath})
	h := newHarness(t, bridge.Options{}, spec)
	proxy := newCutProxy(t, strings.TrimPrefix(h.srv.URL, "http://"))
	ctx := testCtx(t, 90*time.Second)

	// The 40 MB result as a page gets it without a cut.
	direct := h.page(ctx)
	connect(t, ctx, direct, 1, spec)
	want, err := direct.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": "lab", "tool": "big", "arguments": map[string]any{"bytes": 40_000_000, "tag": "t"}})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, want)
	wantBig := resultHash(t, want)

	cases := []struct {
		name string
		args map[string]any
		tool string
		cut  func(r *resPage)
	}{
		{"during progress", map[string]any{"steps": 30, "intervalMs": 50, "tag": "p"}, "slow", func(r *resPage) {
			r.await(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" })
		}},
		{"inside a chunk of a 40 MB result", map[string]any{"bytes": 40_000_000, "tag": "t"}, "big", func(r *resPage) {
			for start := proxy.down.Load(); proxy.down.Load()-start < 12<<20; {
				time.Sleep(time.Millisecond)
			}
		}},
		{"between two chunks of a 40 MB result", map[string]any{"bytes": 40_000_000, "tag": "t"}, "big", func(r *resPage) {
			for {
				if _, frames := r.p.MaxFrame(); frames >= 4 { // hello, connect, chunk 0, chunk 1
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &resPage{t: t}
			hello := r.hello(ctx, proxy.wsURL(), nil)
			mustOK(t, hello)
			if r.token == "" || !strings.Contains(hello.String(), `"features":["resume"]`) {
				t.Fatalf("hello granted no page session: %s", hello)
			}
			if err := r.p.Send(map[string]any{"type": "tools:connect", "id": 1, "server": "lab", "fingerprint": spec.Fingerprint, "confirmed": true}); err != nil {
				t.Fatal(err)
			}
			mustOK(t, r.await(ctx, isReply("tools:connect", 1)))
			id := 100 + i
			tag := fmt.Sprintf("resume-%d", i)
			c.args["tag"] = tag
			if c.tool == "big" {
				c.args["tag"] = "t"
			}
			if err := r.p.Send(map[string]any{"type": "tools:call", "id": id, "server": "lab", "tool": c.tool, "arguments": c.args}); err != nil {
				t.Fatal(err)
			}
			c.cut(r)
			r.pump()
			proxy.cut()
			if r.replies("tools:call", id) != 0 {
				t.Fatal("the outcome arrived before the cut: the test cut too late")
			}
			<-r.p.Done()
			time.Sleep(time.Second)
			again := r.hello(ctx, proxy.wsURL(), nil)
			mustOK(t, again)
			if !strings.Contains(again.String(), `"resumed":true`) {
				t.Fatalf("not resumed: %s", again)
			}
			got := r.await(ctx, isReply("tools:call", id))
			mustOK(t, got)
			time.Sleep(200 * time.Millisecond) // anything sent twice would arrive by now
			r.pump()
			if n := r.replies("tools:call", id); n != 1 {
				t.Errorf("the call's outcome was delivered %d times", n)
			}
			if c.tool == "big" {
				if h := resultHash(t, got); h != wantBig {
					t.Errorf("result after the resume %s, uncut %s", h, wantBig)
				}
			} else if !strings.Contains(got.String(), `"steps":30,"tag":"`+tag+`"`) {
				t.Errorf("result: %.300s", got)
			}
			// The server ran it once.
			n := 0
			for _, m := range journalMethods(t, jpath) {
				if m == "tools/call" {
					n++
				}
			}
			if want := 2 + i; n != want {
				t.Errorf("the server got %d tools/call, want %d", n, want)
			}
		})
	}
}

// TestResumeAfterMinutes: a page away for 4 minutes (a laptop's lid
// closed over a coffee) comes back within the default grace of 5 and gets
// the result of the call that finished while it was away.
func TestResumeAfterMinutes(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 4 minutes")
	}
	t.Parallel()
	spec := fakeServer(t, "lab", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{}, spec)
	proxy := newCutProxy(t, strings.TrimPrefix(h.srv.URL, "http://"))
	ctx := testCtx(t, 6*time.Minute)
	r := &resPage{t: t}
	mustOK(t, r.hello(ctx, proxy.wsURL(), nil))
	_ = r.p.Send(map[string]any{"type": "tools:connect", "id": 1, "server": "lab", "fingerprint": spec.Fingerprint, "confirmed": true})
	mustOK(t, r.await(ctx, isReply("tools:connect", 1)))
	_ = r.p.Send(map[string]any{"type": "tools:call", "id": 2, "server": "lab", "tool": "slow", "arguments": map[string]any{"steps": 40, "intervalMs": 100, "tag": "lid"}})
	r.await(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" })
	proxy.cut()
	<-r.p.Done()
	time.Sleep(4 * time.Minute)
	again := r.hello(ctx, proxy.wsURL(), nil)
	if !strings.Contains(again.String(), `"resumed":true`) {
		t.Fatalf("not resumed after 4 minutes: %s", again)
	}
	got := r.await(ctx, isReply("tools:call", 2))
	mustOK(t, got)
	if !strings.Contains(got.String(), `"steps":40,"tag":"lid"`) {
		t.Errorf("result: %.300s", got)
	}
}

// TestGraceEndCancelsAtServer: a page that does not come back within the
// grace has its call cancelled at the server, and its token resumes
// nothing.
func TestGraceEndCancelsAtServer(t *testing.T) {
	jpath := journal(t)
	spec := fakeServer(t, "lab", bridgetest.Mode{Journal: jpath})
	h := newHarness(t, bridge.Options{ResumeGrace: 1500 * time.Millisecond}, spec)
	proxy := newCutProxy(t, strings.TrimPrefix(h.srv.URL, "http://"))
	ctx := testCtx(t, 60*time.Second)
	r := &resPage{t: t}
	mustOK(t, r.hello(ctx, proxy.wsURL(), nil))
	_ = r.p.Send(map[string]any{"type": "tools:connect", "id": 1, "server": "lab", "fingerprint": spec.Fingerprint, "confirmed": true})
	mustOK(t, r.await(ctx, isReply("tools:connect", 1)))
	_ = r.p.Send(map[string]any{"type": "tools:call", "id": 2, "server": "lab", "tool": "slow", "arguments": map[string]any{"steps": 600, "intervalMs": 50, "tag": "gone"}})
	r.await(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" })
	proxy.cut()
	<-r.p.Done()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if strings.Contains(strings.Join(journalMethods(t, jpath), " "), "notifications/cancelled") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the call was not cancelled at the server after the grace: %v", journalMethods(t, jpath))
		}
		time.Sleep(50 * time.Millisecond)
	}
	again := r.hello(ctx, proxy.wsURL(), nil)
	mustErr(t, again, "session-unknown")
}

// userGate admits the user named by the X-Test-User header (alice if none).
type userGate struct{}

func (userGate) Admit(_ context.Context, r *http.Request) (bridge.Admission, *bridge.Refusal) {
	u := r.Header.Get("X-Test-User")
	if u == "" {
		u = "alice"
	}
	return bridge.Admission{User: u}, nil
}

// TestResumeRefusals: a token presented by another user or from another
// Origin, an expired one, one presented while its socket is still open,
// and a flood of pages away: each refused or bounded as PROTOCOL.md says,
// with nothing about the session revealed, and another user's call
// undisturbed.
func TestResumeRefusals(t *testing.T) {
	spec := fakeServer(t, "lab", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{Gate: userGate{}, ResumeGrace: 3 * time.Second, MaxAwayPerUser: 2}, spec)
	ctx := testCtx(t, 60*time.Second)
	hdr := func(user, origin string) http.Header {
		h := http.Header{"X-Test-User": {user}}
		if origin != "" {
			h.Set("Origin", origin)
		}
		return h
	}
	alice := &resPage{t: t}
	mustOK(t, alice.hello(ctx, h.wsURL, hdr("alice", "")))
	_ = alice.p.Send(map[string]any{"type": "tools:connect", "id": 1, "server": "lab", "fingerprint": spec.Fingerprint, "confirmed": true})
	mustOK(t, alice.await(ctx, isReply("tools:connect", 1)))

	// Used twice at once: the socket is still open.
	twice := &resPage{t: t, token: alice.token}
	mustErr(t, twice.hello(ctx, h.wsURL, hdr("alice", "")), "session-in-use")

	// bob's call runs through all of it.
	bob := &resPage{t: t}
	mustOK(t, bob.hello(ctx, h.wsURL, hdr("bob", "")))
	_ = bob.p.Send(map[string]any{"type": "tools:connect", "id": 1, "server": "lab", "fingerprint": spec.Fingerprint, "confirmed": true})
	mustOK(t, bob.await(ctx, isReply("tools:connect", 1)))
	_ = bob.p.Send(map[string]any{"type": "tools:call", "id": 2, "server": "lab", "tool": "slow", "arguments": map[string]any{"steps": 20, "intervalMs": 100, "tag": "bob"}})

	alice.p.Drop()
	time.Sleep(100 * time.Millisecond)
	var unknown string
	for _, c := range []struct {
		name string
		hdr  http.Header
	}{
		{"stolen by another user", hdr("bob", "")},
		{"from another origin", hdr("alice", "http://evil.example")},
	} {
		thief := &resPage{t: t, token: alice.token}
		reply := thief.hello(ctx, h.wsURL, c.hdr)
		mustErr(t, reply, "session-unknown")
		if unknown == "" {
			unknown = reply.Error.Message
		} else if reply.Error.Message != unknown {
			t.Errorf("%s: the refusal differs: %q vs %q", c.name, reply.Error.Message, unknown)
		}
	}
	made := &resPage{t: t, token: "ps_" + strings.Repeat("A", 43)}
	if reply := made.hello(ctx, h.wsURL, hdr("alice", "")); reply.Error == nil || reply.Error.Message != unknown {
		t.Errorf("an unknown token and a stolen one must be refused alike: %s", reply)
	}

	// Expired: the grace is 3 s.
	time.Sleep(3500 * time.Millisecond)
	late := &resPage{t: t, token: alice.token}
	if reply := late.hello(ctx, h.wsURL, hdr("alice", "")); reply.Error == nil || reply.Error.Message != unknown {
		t.Errorf("an expired token: %s", reply)
	}
	// A flood of pages away: alice may have 2.
	var flood []*resPage
	for i := 0; i < 5; i++ {
		p := &resPage{t: t}
		mustOK(t, p.hello(ctx, h.wsURL, hdr("alice", "")))
		p.p.Drop()
		flood = append(flood, p)
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	resumed := 0
	for _, p := range flood {
		if r := p.hello(ctx, h.wsURL, hdr("alice", "")); r.OK != nil && *r.OK {
			resumed++
		}
	}
	if resumed != 2 {
		t.Errorf("%d of 5 pages away resumed, want the 2 newest (max_away_per_user)", resumed)
	}

	mustOK(t, bob.await(ctx, isReply("tools:call", 2)))
}

// TestResumeResendsUnread: requests the bridge never read before the cut
// are learnt from "received" and sent again, and a page that presents a
// seq it never got is refused.
func TestResumeResendsUnread(t *testing.T) {
	spec := fakeServer(t, "lab", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{}, spec)
	ctx := testCtx(t, 60*time.Second)
	r := &resPage{t: t}
	mustOK(t, r.hello(ctx, h.wsURL, nil))
	_ = r.p.Send(map[string]any{"type": "tools:connect", "id": 1, "server": "lab", "fingerprint": spec.Fingerprint, "confirmed": true})
	mustOK(t, r.await(ctx, isReply("tools:connect", 1)))
	r.p.Drop()
	time.Sleep(100 * time.Millisecond)
	bad := &resPage{t: t, token: r.token, last: 99}
	mustErr(t, bad.hello(ctx, h.wsURL, nil), "bad-request")
	again := r.hello(ctx, h.wsURL, nil)
	if !bytes.Contains(again.Raw, []byte(`"received":1`)) {
		t.Fatalf("want received 1 (the connect): %s", again)
	}
}

// TestAwayMemoryDropsResults: a result that comes while its page is away
// and would take the bridge past AwayMemory is replaced by a dropped error
// that says so (the page learns it on resume, never silently); a small
// outcome of the same page is kept.
func TestAwayMemoryDropsResults(t *testing.T) {
	spec := fakeServer(t, "lab", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{AwayMemory: 1 << 20}, spec)
	ctx := testCtx(t, 60*time.Second)
	r := &resPage{t: t}
	mustOK(t, r.hello(ctx, h.wsURL, nil))
	_ = r.p.Send(map[string]any{"type": "tools:connect", "id": 1, "server": "lab", "fingerprint": spec.Fingerprint, "confirmed": true})
	mustOK(t, r.await(ctx, isReply("tools:connect", 1)))
	_ = r.p.Send(map[string]any{"type": "tools:call", "id": 2, "server": "lab", "tool": "slow", "arguments": map[string]any{"steps": 3, "intervalMs": 100, "tag": "small"}})
	_ = r.p.Send(map[string]any{"type": "tools:call", "id": 3, "server": "lab", "tool": "big", "arguments": map[string]any{"bytes": 3 << 20}})
	r.p.Drop()
	time.Sleep(time.Second)
	again := r.hello(ctx, h.wsURL, nil)
	if !strings.Contains(again.String(), `"resumed":true`) {
		t.Fatalf("not resumed: %s", again)
	}
	mustOK(t, r.await(ctx, isReply("tools:call", 2)))
	dropped := r.await(ctx, isReply("tools:call", 3))
	mustErr(t, dropped, "dropped")
	if !strings.Contains(dropped.Error.Message, "the result of big (3 MiB) came while this page was away") {
		t.Errorf("the dropped result's message: %q", dropped.Error.Message)
	}
	m := scrape(t, h.srv.URL+"/megane/builder-tools/metrics", nil)
	if v := value(m, "megane_bridge_outcomes_dropped_total", nil); v != 1 {
		t.Errorf("megane_bridge_outcomes_dropped_total = %v, want 1", v)
	}
	if v := value(m, "megane_bridge_page_resumes_total", nil); v != 1 {
		t.Errorf("megane_bridge_page_resumes_total = %v, want 1", v)
	}
}

// revocableGate admits alice until revoked is set; her sockets and her
// pages away are re-checked every 100 ms.
type revocableGate struct{ revoked *atomic.Bool }

func (g revocableGate) Admit(context.Context, *http.Request) (bridge.Admission, *bridge.Refusal) {
	if g.revoked.Load() {
		return bridge.Admission{}, &bridge.Refusal{CloseCode: bridge.CloseForbidden, Reason: "alice may not execute kernels"}
	}
	return bridge.Admission{User: "alice", RecheckInterval: 100 * time.Millisecond, Recheck: func(context.Context) *bridge.Refusal {
		if g.revoked.Load() {
			return &bridge.Refusal{CloseCode: bridge.CloseForbidden, Reason: "alice may not execute kernels"}
		}
		return nil
	}}, nil
}

// TestRevokedWhileAway: a user whose right to execute kernels is revoked
// while her page is away has the page session's calls cancelled at the
// server at the next re-check, not at the grace's end, and her new socket
// is refused at the door.
func TestRevokedWhileAway(t *testing.T) {
	jpath := journal(t)
	spec := fakeServer(t, "lab", bridgetest.Mode{Journal: jpath})
	revoked := &atomic.Bool{}
	h := newHarness(t, bridge.Options{Gate: revocableGate{revoked}}, spec)
	ctx := testCtx(t, 60*time.Second)
	r := &resPage{t: t}
	mustOK(t, r.hello(ctx, h.wsURL, nil))
	_ = r.p.Send(map[string]any{"type": "tools:connect", "id": 1, "server": "lab", "fingerprint": spec.Fingerprint, "confirmed": true})
	mustOK(t, r.await(ctx, isReply("tools:connect", 1)))
	_ = r.p.Send(map[string]any{"type": "tools:call", "id": 2, "server": "lab", "tool": "slow", "arguments": map[string]any{"steps": 600, "intervalMs": 50}})
	r.await(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" })
	r.p.Drop()
	time.Sleep(200 * time.Millisecond)
	revoked.Store(true)
	deadline := time.Now().Add(10 * time.Second) // the grace is 5 minutes
	for !strings.Contains(strings.Join(journalMethods(t, jpath), " "), "notifications/cancelled") {
		if time.Now().After(deadline) {
			t.Fatalf("the revoked user's call still runs: %v", journalMethods(t, jpath))
		}
		time.Sleep(50 * time.Millisecond)
	}
	p, _, err := bridgetest.Dial(ctx, h.wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:closing" })
	if err != nil || !strings.Contains(m.String(), "4403") {
		t.Fatalf("the revoked user's new socket: %v %v", err, m)
	}
}

// TestAwayFloodBounded: one user opens page after page, asks each for a
// 16 MB result and drops it at once, so that every result arrives for a
// page away. The bridge keeps at most MaxAwayPerUser of her pages away and
// AwayMemory of what they hold, its memory stays under the ceiling, and
// another user's calls are answered throughout.
func TestAwayFloodBounded(t *testing.T) {
	spec := fakeServer(t, "lab", bridgetest.Mode{})
	const ceiling = 512 << 20
	h := newHarness(t, bridge.Options{Gate: userGate{}, MemoryLimit: ceiling, ResultLimit: 64 << 20, AwayMemory: 64 << 20}, spec)
	ctx := testCtx(t, 120*time.Second)
	var peak atomic.Uint64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			peak.Store(max(peak.Load(), mappedNow()))
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	alice := h.page(ctx)
	connect(t, ctx, alice, 1, spec)
	hdr := http.Header{"X-Test-User": {"mallory"}}
	for i := 0; i < 24; i++ {
		r := &resPage{t: t}
		mustOK(t, r.hello(ctx, h.wsURL, hdr))
		_ = r.p.Send(map[string]any{"type": "tools:connect", "id": 1, "server": "lab", "fingerprint": spec.Fingerprint, "confirmed": true})
		r.await(ctx, isReply("tools:connect", 1))
		_ = r.p.Send(map[string]any{"type": "tools:call", "id": 2, "server": "lab", "tool": "big", "arguments": map[string]any{"bytes": 16 << 20}})
		r.p.Drop()
		m, err := alice.Request(ctx, map[string]any{"type": "tools:call", "id": 100 + i, "server": "lab", "tool": "echo", "arguments": map[string]any{"i": i}})
		if err != nil {
			t.Fatal(err)
		}
		mustOK(t, m)
	}
	time.Sleep(2 * time.Second) // the last results arrive for pages away
	close(stop)
	sampler.Wait()
	fams := scrape(t, h.srv.URL+"/megane/builder-tools/metrics", nil)
	away, held := value(fams, "megane_bridge_pages_away", nil), value(fams, "megane_bridge_page_held_bytes", nil)
	ended := value(fams, "megane_bridge_page_sessions_ended_away_total", map[string]string{"why": "bound"})
	dropped := value(fams, "megane_bridge_outcomes_dropped_total", nil)
	t.Logf("pages away %v, held %.1f MiB, ended by a bound %v, results dropped %v, peak memory %.0f MiB of %d", away, held/(1<<20), ended, dropped, float64(peak.Load())/(1<<20), ceiling>>20)
	if away > 8 || ended < 16 {
		t.Errorf("%v pages away, %v ended by the bound: want at most 8 away (max_away_per_user)", away, ended)
	}
	if held > 64<<20 {
		t.Errorf("%.1f MiB held for pages away, over away_memory (64 MiB)", held/(1<<20))
	}
	if p := peak.Load(); p > ceiling {
		t.Errorf("the process's memory peaked at %.0f MiB, over the %d MiB ceiling", float64(p)/(1<<20), ceiling>>20)
	}
}

// mappedNow is the Go runtime's memory not handed back to the system, as
// the bridge's ceiling measures it.
func mappedNow() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}
