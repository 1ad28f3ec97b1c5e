package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/auth"
	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// testGate admits everyone as "alice": these tests are about the relay.
type testGate struct{ user string }

func (g testGate) Admit(context.Context, *http.Request) (bridge.Admission, *bridge.Refusal) {
	u := g.user
	if u == "" {
		u = "alice"
	}
	return bridge.Admission{User: u}, nil
}

// fakeServer returns the spec of a bridgetest server running in a child of
// this test binary.
func fakeServer(t testing.TB, name string, mode bridgetest.Mode) bridge.ServerSpec {
	t.Helper()
	if mode.Name == "" {
		mode.Name = name
	}
	spec, err := json.Marshal(mode)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return bridge.ServerSpec{
		Name: name, Transport: bridge.TransportStdio,
		Command: exe, Args: []string{"-test.run=^$"},
		Env:         map[string]string{"BRIDGETEST_SERVER": string(spec)},
		Source:      "test",
		Fingerprint: "sha256:" + fmt.Sprintf("%x", len(spec)) + name,
	}
}

type harness struct {
	t      testing.TB
	b      *bridge.Bridge
	srv    *httptest.Server
	wsURL  string
	logBuf *syncBuffer
}

type syncBuffer = bridgetest.Buffer

func newHarness(t testing.TB, opts bridge.Options, servers ...bridge.ServerSpec) *harness {
	t.Helper()
	leakCheck(t) // first, so that it runs after the harness's cleanup
	h := &harness{t: t, logBuf: &syncBuffer{}}
	if opts.Catalog == nil {
		opts.Catalog = bridge.StaticCatalog{Servers: servers}
	}
	if opts.Gate == nil {
		opts.Gate = testGate{}
	}
	if opts.Approvals == nil {
		opts.Approvals = auth.NewReceipts([]byte("0123456789abcdef0123456789abcdef"), auth.ReceiptOptions{})
	}
	if opts.IdleGrace == 0 {
		opts.IdleGrace = -1
	}
	if opts.TerminateDuration == 0 {
		opts.TerminateDuration = 500 * time.Millisecond
	}
	if opts.KillDuration == 0 {
		opts.KillDuration = time.Second
	}
	opts.Logger = slogTo(h.logBuf)
	h.b = bridge.New(opts)
	h.srv = httptest.NewServer(h.b)
	h.wsURL = "ws" + strings.TrimPrefix(h.srv.URL, "http") + "/megane/builder-tools/ws"
	t.Cleanup(func() {
		h.srv.CloseClientConnections()
		h.b.Close()
		h.srv.Close()
	})
	return h
}

func (h *harness) page(ctx context.Context) *bridgetest.Page {
	h.t.Helper()
	p, _, err := bridgetest.Dial(ctx, h.wsURL, nil)
	if err != nil {
		h.t.Fatalf("dial: %v", err)
	}
	h.t.Cleanup(func() { p.Close() })
	return p
}

// connect connects p to server with confirmed: true and returns the reply.
func connect(t testing.TB, ctx context.Context, p *bridgetest.Page, id any, spec bridge.ServerSpec) *bridgetest.Msg {
	t.Helper()
	r, err := p.Request(ctx, map[string]any{"type": "tools:connect", "id": id, "server": spec.Name,
		"fingerprint": spec.Fingerprint, "confirmed": true})
	if err != nil {
		t.Fatalf("connect %s: %v", spec.Name, err)
	}
	if r.OK == nil || !*r.OK {
		t.Fatalf("connect %s failed: %s", spec.Name, r)
	}
	return r
}

func mustOK(t testing.TB, m *bridgetest.Msg) {
	t.Helper()
	if m.OK == nil || !*m.OK {
		t.Fatalf("expected ok, got %s", m)
	}
}

func mustErr(t testing.TB, m *bridgetest.Msg, code string) {
	t.Helper()
	if m.OK == nil || *m.OK || m.Error == nil || m.Error.Code != code {
		t.Fatalf("expected error %q, got %s", code, m)
	}
	if m.Error.Message == "" || strings.ContainsAny(m.Error.Message, "\n\r") {
		t.Fatalf("error message must be one non-empty line: %q", m.Error.Message)
	}
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func journal(t testing.TB) string {
	return filepath.Join(t.TempDir(), "journal.jsonl")
}

// journalMethods returns the methods a bridgetest server received.
func journalMethods(t testing.TB, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read journal: %v", err)
	}
	var methods []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var e bridgetest.JournalEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("journal line %q: %v", line, err)
		}
		if e.Start || e.Response != nil {
			continue
		}
		methods = append(methods, e.Method)
	}
	return methods
}

func slogTo(w *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
