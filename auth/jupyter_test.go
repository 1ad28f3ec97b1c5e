package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// fakeParent answers Ask from a function and records what it was asked.
type fakeParent struct {
	mu     sync.Mutex
	asked  []jupyter.Credentials
	answer func(jupyter.Credentials) (jupyter.Verdict, error)
}

func (f *fakeParent) Ask(_ context.Context, c jupyter.Credentials) (jupyter.Verdict, error) {
	f.mu.Lock()
	f.asked = append(f.asked, c)
	ans := f.answer
	f.mu.Unlock()
	return ans(c)
}

func (f *fakeParent) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.asked)
}

func (f *fakeParent) setAnswer(a func(jupyter.Credentials) (jupyter.Verdict, error)) {
	f.mu.Lock()
	f.answer = a
	f.mu.Unlock()
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func upgradeRequest(host string, kv ...string) *http.Request {
	r := httptest.NewRequest("GET", "/builder-tools/ws", nil)
	r.Host = host
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == "query" {
			r.URL.RawQuery = kv[i+1]
			continue
		}
		r.Header.Add(kv[i], kv[i+1])
	}
	return r
}

func allowAlice(jupyter.Credentials) (jupyter.Verdict, error) {
	return jupyter.Verdict{Outcome: jupyter.Allowed, User: "alice"}, nil
}

func TestJupyterGateForwarding(t *testing.T) {
	fp := &fakeParent{answer: allowAlice}
	g := newJupyterGate(fp, true, "http://127.0.0.1:1/", JupyterOptions{})
	r := upgradeRequest("127.0.0.1:8888", "query", "token=abc&x=1", "Authorization", "token other", "Cookie", "a=1", "Cookie", "b=2", "Origin", "http://127.0.0.1:8888")
	if _, ref := g.Admit(context.Background(), r); ref != nil {
		t.Fatalf("refused: %+v", ref)
	}
	got := fp.asked[0]
	want := jupyter.Credentials{Cookie: "a=1; b=2", Authorization: "token abc", Host: "127.0.0.1:8888", Origin: "http://127.0.0.1:8888"}
	if got != want {
		t.Fatalf("forwarded %+v, want %+v", got, want)
	}
}

func TestJupyterGateCache(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	fp := &fakeParent{answer: allowAlice}
	g := newJupyterGate(fp, true, "x", JupyterOptions{Now: clk.now, CacheSize: 3})
	admit := func(cookie string) (string, int) {
		adm, ref := g.Admit(context.Background(), upgradeRequest("h:1", "Cookie", cookie))
		if ref != nil {
			return "", ref.CloseCode
		}
		return adm.User, 0
	}
	admit("c=1")
	admit("c=1")
	if fp.calls() != 1 {
		t.Fatalf("an allowed verdict was not reused: %d questions", fp.calls())
	}
	clk.add(59 * time.Second)
	admit("c=1")
	if fp.calls() != 1 {
		t.Fatal("an allowed verdict was not reused within 60 s")
	}
	clk.add(2 * time.Second)
	admit("c=1")
	if fp.calls() != 2 {
		t.Fatal("an allowed verdict was reused after 60 s")
	}

	fp.setAnswer(func(jupyter.Credentials) (jupyter.Verdict, error) {
		return jupyter.Verdict{Outcome: jupyter.Forbidden, User: "bob"}, nil
	})
	if _, code := admit("c=bob"); code != 4403 {
		t.Fatalf("code %d", code)
	}
	clk.add(4 * time.Second)
	admit("c=bob")
	if fp.calls() != 3 {
		t.Fatalf("a refusal was not reused within 5 s: %d", fp.calls())
	}
	clk.add(2 * time.Second)
	admit("c=bob")
	if fp.calls() != 4 {
		t.Fatal("a refusal was reused after 5 s")
	}

	fp.setAnswer(func(jupyter.Credentials) (jupyter.Verdict, error) {
		return jupyter.Verdict{}, errors.New("connection refused")
	})
	before := fp.calls()
	for range 3 {
		if _, code := admit("c=err"); code != 4503 {
			t.Fatalf("code %d for an unreachable parent", code)
		}
	}
	if fp.calls() != before+3 {
		t.Fatal("an error was cached")
	}

	t.Run("bounded", func(t *testing.T) {
		fp.setAnswer(allowAlice)
		for i := range 10 {
			admit(fmt.Sprintf("c=%d", i))
		}
		if n := g.cache.len(); n > 3 {
			t.Fatalf("cache holds %d entries, bound 3", n)
		}
	})

	t.Run("keyed by Host and Origin too", func(t *testing.T) {
		fp.setAnswer(allowAlice)
		n := fp.calls()
		g.Admit(context.Background(), upgradeRequest("h:1", "Cookie", "k=1"))
		g.Admit(context.Background(), upgradeRequest("h:2", "Cookie", "k=1"))
		g.Admit(context.Background(), upgradeRequest("h:2", "Cookie", "k=1", "Origin", "http://h:2"))
		if fp.calls() != n+3 {
			t.Fatalf("%d questions for 3 different Host/Origin pairs", fp.calls()-n)
		}
	})
}

func TestJupyterGateRecheck(t *testing.T) {
	fp := &fakeParent{answer: allowAlice}
	g := newJupyterGate(fp, true, "x", JupyterOptions{RecheckInterval: time.Second})
	adm, ref := g.Admit(context.Background(), upgradeRequest("h:1", "Cookie", "c=1"))
	if ref != nil || adm.Recheck == nil || adm.RecheckInterval != time.Second || adm.User != "alice" {
		t.Fatalf("adm %+v ref %+v", adm, ref)
	}
	if ref := adm.Recheck(context.Background()); ref != nil {
		t.Fatalf("recheck refused: %+v", ref)
	}
	if fp.calls() != 2 {
		t.Fatal("recheck did not ask the parent again")
	}
	cases := []struct {
		name   string
		answer func(jupyter.Credentials) (jupyter.Verdict, error)
		code   int
		reason string
	}{
		{"access lost", func(jupyter.Credentials) (jupyter.Verdict, error) {
			return jupyter.Verdict{Outcome: jupyter.Forbidden, User: "alice"}, nil
		}, 4403, "may not execute kernels"},
		{"logged out", func(jupyter.Credentials) (jupyter.Verdict, error) {
			return jupyter.Verdict{Outcome: jupyter.Unauthenticated}, nil
		}, 4403, "session ended"},
		{"origin now refused", func(jupyter.Credentials) (jupyter.Verdict, error) {
			return jupyter.Verdict{Outcome: jupyter.OriginRefused}, nil
		}, 4403, "origin"},
		{"parent gone", func(jupyter.Credentials) (jupyter.Verdict, error) {
			return jupyter.Verdict{}, errors.New("dial: connection refused")
		}, 4503, "could not reach"},
		{"parent answers nonsense", func(jupyter.Credentials) (jupyter.Verdict, error) {
			return jupyter.Verdict{}, fmt.Errorf("%w: GET /api/me: 500", jupyter.ErrUnexpected)
		}, 4503, "could not be interpreted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fp.setAnswer(tc.answer)
			ref := adm.Recheck(context.Background())
			if ref == nil || ref.HTTPStatus != 0 || ref.CloseCode != tc.code || !strings.Contains(ref.Reason, tc.reason) {
				t.Fatalf("recheck gave %+v, want close %d ~%q", ref, tc.code, tc.reason)
			}
		})
	}
}

func TestJupyterGateNoAuthParent(t *testing.T) {
	fp := &fakeParent{answer: allowAlice}
	g := newJupyterGate(fp, false, "x", JupyterOptions{})
	if _, ref := g.Admit(context.Background(), upgradeRequest("h:1")); ref != nil {
		t.Fatalf("a parent without authentication was not asked: %+v", ref)
	}
	if fp.calls() != 1 {
		t.Fatal("not asked")
	}
	g = newJupyterGate(fp, true, "x", JupyterOptions{})
	if _, ref := g.Admit(context.Background(), upgradeRequest("h:1")); ref == nil || ref.CloseCode != 4401 {
		t.Fatalf("no credentials: %+v", ref)
	}
	if fp.calls() != 1 {
		t.Fatal("a request without credentials was forwarded")
	}
}

func TestJupyterGateOriginRule(t *testing.T) {
	fp := &fakeParent{answer: allowAlice}
	cases := []struct {
		name   string
		opts   JupyterOptions
		host   string
		kv     []string
		status int
	}{
		{"no Origin", JupyterOptions{}, "h:1", []string{"Cookie", "c"}, 0},
		{"same origin", JupyterOptions{}, "h:1", []string{"Cookie", "c", "Origin", "https://h:1"}, 0},
		{"foreign", JupyterOptions{}, "h:1", []string{"Cookie", "c", "Origin", "https://evil"}, 403},
		{"port differs", JupyterOptions{}, "h:1", []string{"Cookie", "c", "Origin", "http://h:2"}, 403},
		{"token skips the check", JupyterOptions{}, "h:1", []string{"Authorization", "token t", "Origin", "https://evil"}, 0},
		{"query token skips the check", JupyterOptions{}, "h:1", []string{"query", "token=t", "Origin", "https://evil"}, 0},
		{"allow_origin exact", JupyterOptions{AllowOrigin: "https://app"}, "h:1", []string{"Cookie", "c", "Origin", "https://app"}, 0},
		{"allow_origin other", JupyterOptions{AllowOrigin: "https://app"}, "h:1", []string{"Cookie", "c", "Origin", "https://app2"}, 403},
		{"allow_origin star", JupyterOptions{AllowOrigin: "*"}, "h:1", []string{"Cookie", "c", "Origin", "https://any"}, 0},
		{"allow_origin_pat", JupyterOptions{AllowOriginPat: `https://.*\.example\.org`}, "h:1", []string{"Cookie", "c", "Origin", "https://a.example.org"}, 0},
		{"allow_origin_pat anchored at start", JupyterOptions{AllowOriginPat: `https://app`}, "h:1", []string{"Cookie", "c", "Origin", "http://evil/https://app"}, 403},
		{"allow_origin_pat invalid fails closed", JupyterOptions{AllowOriginPat: `(?<!x)`}, "h:1", []string{"Cookie", "c", "Origin", "https://x"}, 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newJupyterGate(fp, true, "x", tc.opts)
			_, ref := g.Admit(context.Background(), upgradeRequest(tc.host, tc.kv...))
			if tc.status == 0 && ref != nil {
				t.Fatalf("refused: %+v", ref)
			}
			if tc.status != 0 && (ref == nil || ref.HTTPStatus != tc.status) {
				t.Fatalf("got %+v, want HTTP %d", ref, tc.status)
			}
		})
	}
}

// Reasons travel in close frames, whose payload is at most 125 bytes.
func TestRefusalReasonsFitACloseFrame(t *testing.T) {
	outcomes := []func(jupyter.Credentials) (jupyter.Verdict, error){
		func(jupyter.Credentials) (jupyter.Verdict, error) {
			return jupyter.Verdict{Outcome: jupyter.Forbidden, User: "a-rather-long-user-name"}, nil
		},
		func(jupyter.Credentials) (jupyter.Verdict, error) {
			return jupyter.Verdict{Outcome: jupyter.Unauthenticated}, nil
		},
		func(jupyter.Credentials) (jupyter.Verdict, error) { return jupyter.Verdict{}, errors.New("x") },
		func(jupyter.Credentials) (jupyter.Verdict, error) { return jupyter.Verdict{}, jupyter.ErrUnexpected },
		func(jupyter.Credentials) (jupyter.Verdict, error) {
			return jupyter.Verdict{}, fmt.Errorf("%w: GET /api: 404", jupyter.ErrNotJupyter)
		},
		func(jupyter.Credentials) (jupyter.Verdict, error) {
			return jupyter.Verdict{}, fmt.Errorf("%w: pid 1", jupyter.ErrParentGone)
		},
		func(jupyter.Credentials) (jupyter.Verdict, error) {
			return jupyter.Verdict{}, fmt.Errorf("%w: handshake", jupyter.ErrTLS)
		},
	}
	for i, o := range outcomes {
		g := newJupyterGate(&fakeParent{answer: o}, true, "http://127.0.0.1:8888/user/someone-with-a-long-name/", JupyterOptions{})
		_, ref := g.Admit(context.Background(), upgradeRequest("h:1", "Cookie", "c"))
		if ref == nil || ref.CloseCode == 0 {
			t.Fatalf("%d: %+v", i, ref)
		}
		if len(ref.Reason) > 123 {
			t.Errorf("reason of %d is %d bytes: %q", ref.CloseCode, len(ref.Reason), ref.Reason)
		}
	}
	g := newJupyterGate(&fakeParent{answer: allowAlice}, true, "x", JupyterOptions{})
	_, ref := g.Admit(context.Background(), upgradeRequest("h:1"))
	if ref == nil || len(ref.Reason) > 123 {
		t.Errorf("no-credentials reason: %+v", ref)
	}
}

// ctxParent blocks in Ask until released and hands over the context it was
// asked with.
type ctxParent struct {
	asked   chan context.Context
	release chan struct{}
}

func (p *ctxParent) Ask(ctx context.Context, _ jupyter.Credentials) (jupyter.Verdict, error) {
	p.asked <- ctx
	<-p.release
	return jupyter.Verdict{Outcome: jupyter.Allowed, User: "alice"}, nil
}

// TestJupyterGateSharedQuestionOutlivesFirstRequest: tabs opened together
// with the same credentials share one question to Jupyter. The first
// request going away (its context cancelled) must not cancel the question,
// or every tab waiting on it would be refused with 4503.
func TestJupyterGateSharedQuestionOutlivesFirstRequest(t *testing.T) {
	p := &ctxParent{asked: make(chan context.Context, 1), release: make(chan struct{})}
	g := newJupyterGate(p, true, "x", JupyterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *int, 1)
	go func() {
		_, ref := g.Admit(ctx, upgradeRequest("h:1", "Cookie", "a=1"))
		code := 0
		if ref != nil {
			code = ref.CloseCode
		}
		done <- &code
	}()
	asked := <-p.asked
	cancel()
	if err := asked.Err(); err != nil {
		t.Errorf("the question to Jupyter was cancelled with the first request: %v", err)
	}
	close(p.release)
	if code := <-done; *code != 0 {
		t.Errorf("refused with %d", *code)
	}
}
