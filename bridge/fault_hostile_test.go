package bridge_test

import (
	"bufio"
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// TestHostileCorpus sends every frame of testdata/hostile-frames.txt on one
// connected tab and checks each is answered with its documented code (a
// one-line message), that the socket stays usable, and, from the server's
// journal, that nothing but initialize, tools/list, tools/call of listed
// tools and notifications ever reached the tool server: raw JSON-RPC in any
// field of a page message is data, never a method.
func TestHostileCorpus(t *testing.T) {
	leakCheck(t)
	ctx := testCtx(t, 60*time.Second)
	j := journal(t)
	spec := fakeServer(t, "fake", bridgetest.Mode{Journal: j})
	h := newHarness(t, bridge.Options{InboundLimit: 1 << 20}, spec)
	p := h.page(ctx)
	connect(t, ctx, p, "connect", spec)

	data, err := os.ReadFile("testdata/hostile-frames.txt")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{"-": true}
	for _, c := range bridge.ErrorCodes {
		documented[c] = true
	}
	calls := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		code, frame, ok := strings.Cut(line, "\t")
		if !ok || !documented[code] {
			t.Fatalf("corpus line %q: want <code>\\t<frame> with a documented code", line)
		}
		n++
		if code == "-" && strings.Contains(frame, `"tools:call"`) {
			calls++
		}
		if err := p.SendFrame([]byte(frame)); err != nil {
			t.Fatalf("%s: %v", frame, err)
		}
		m, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.OK != nil })
		if err != nil {
			t.Fatalf("%s: no answer: %v", frame, err)
		}
		if code == "-" {
			if !*m.OK {
				t.Errorf("%s: want ok, got %s", frame, m)
			}
			continue
		}
		if *m.OK || m.Error == nil || m.Error.Code != code {
			t.Errorf("%s: want %s, got %s", frame, code, m)
			continue
		}
		if m.Error.Message == "" || strings.ContainsAny(m.Error.Message, "\r\n") {
			t.Errorf("%s: the message must be one line: %q", frame, m.Error.Message)
		}
	}
	t.Logf("%d hostile frames answered", n)
	r, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": "still-there"})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)

	entries, err := bridgetest.ReadJournal(j)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, e := range entries {
		switch e.Method {
		case "", "server/discover", "initialize", "notifications/initialized", "tools/list", "notifications/cancelled":
		case "tools/call":
			got++
			if e.Tool != "echo" {
				t.Errorf("the server was asked to call %q", e.Tool)
			}
		default:
			t.Errorf("the server received %q", e.Method)
		}
		// server/discover (revision 2026-07-28) is the one unknown method
		// allowed: this 2025-11-25 server refuses it, and the bridge falls
		// back to initialize.
		if e.Unknown && e.Method != "server/discover" || e.ParseError {
			t.Errorf("the server received a message it could not handle: %+v", e)
		}
	}
	if got != calls {
		t.Errorf("the server received %d tools/call, the corpus makes %d", got, calls)
	}
}
