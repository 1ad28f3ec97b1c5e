package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child/childtest"
)

// allowedMethods are the only methods a tool server may ever receive.
var allowedMethods = []string{"server/discover", "initialize", "notifications/initialized", "tools/list", "tools/call", "notifications/cancelled"}

func checkJournal(t *testing.T, path string) []string {
	t.Helper()
	methods := journalMethods(t, path)
	for _, m := range methods {
		if !slices.Contains(allowedMethods, m) {
			t.Errorf("the server received %q; only %v may ever reach it", m, allowedMethods)
		}
	}
	return methods
}

func TestServersConnectCall(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	j := journal(t)
	spec := fakeServer(t, "fake", bridgetest.Mode{Journal: j})
	spec.Env["SECRET_VALUE"] = "s3cret"
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)

	r, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": 1})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	var servers []map[string]any
	json.Unmarshal(r.Fields["servers"], &servers)
	if len(servers) != 1 || servers[0]["name"] != "fake" || servers[0]["transport"] != "stdio" ||
		servers[0]["fingerprint"] != spec.Fingerprint || servers[0]["state"] != "stopped" {
		t.Fatalf("servers: %s", r.Fields["servers"])
	}
	if strings.Contains(r.String(), "s3cret") {
		t.Fatalf("tools:servers leaked an env value: %s", r)
	}
	var bridgeInfo struct {
		Name     string
		Protocol int
	}
	json.Unmarshal(r.Fields["bridge"], &bridgeInfo)
	if bridgeInfo.Name != "megane-jupyter-bridge" || bridgeInfo.Protocol != bridge.ProtocolVersion {
		t.Fatalf("bridge info: %s", r.Fields["bridge"])
	}

	c := connect(t, ctx, p, "c1", spec)
	var tools []struct{ Name string }
	if err := json.Unmarshal(c.Fields["tools"], &tools); err != nil || len(tools) == 0 {
		t.Fatalf("tools: %v %s", err, c.Fields["tools"])
	}
	if c.Str("approval") == "" {
		t.Fatalf("a confirmed connect must return an approval: %s", c)
	}
	var info struct{ Name string }
	json.Unmarshal(c.Fields["serverInfo"], &info)
	if info.Name != "fake" || c.Str("protocolVersion") != "2025-11-25" {
		t.Fatalf("serverInfo/protocolVersion: %s", c)
	}

	res, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": "fake", "tool": "echo",
		"arguments": map[string]any{"tag": "hello", "n": 1.5}})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, res)
	var result struct {
		StructuredContent struct {
			Echo map[string]any `json:"echo"`
		} `json:"structuredContent"`
	}
	json.Unmarshal(res.Fields["result"], &result)
	if result.StructuredContent.Echo["tag"] != "hello" {
		t.Fatalf("echo result: %s", res.Fields["result"])
	}

	r, _ = p.Request(ctx, map[string]any{"type": "tools:servers", "id": 3})
	json.Unmarshal(r.Fields["servers"], &servers)
	if servers[0]["state"] != "connected" || servers[0]["connected"] != true {
		t.Fatalf("after connect: %s", r.Fields["servers"])
	}

	d, _ := p.Request(ctx, map[string]any{"type": "tools:disconnect", "id": 4, "server": "fake"})
	mustOK(t, d)
	res, _ = p.Request(ctx, map[string]any{"type": "tools:call", "id": 5, "server": "fake", "tool": "echo", "arguments": map[string]any{}})
	mustErr(t, res, bridge.CodeNotConnected)
	waitFor(t, 10*time.Second, "the session to stop", func() bool {
		r, _ := p.Request(ctx, map[string]any{"type": "tools:servers", "id": "s"})
		json.Unmarshal(r.Fields["servers"], &servers)
		return servers[0]["state"] == "stopped"
	})
	checkJournal(t, j)
}

func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestConfirmation(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	spec := fakeServer(t, "fake", bridgetest.Mode{})
	other := fakeServer(t, "other", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{}, spec, other)
	p := h.page(ctx)

	req := func(id int, fields map[string]any) *bridgetest.Msg {
		m := map[string]any{"type": "tools:connect", "id": id}
		for k, v := range fields {
			m[k] = v
		}
		r, err := p.Request(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := req(1, map[string]any{"server": "fake"})
	mustErr(t, r, bridge.CodeConfirmationRequired)
	if !bytes.Contains(r.Error.Server, []byte(`"commandLine"`)) {
		t.Fatalf("confirmation-required must carry the entry to show: %s", r)
	}
	r = req(2, map[string]any{"server": "fake", "fingerprint": "sha256:old"})
	mustErr(t, r, bridge.CodeFingerprintChanged)
	if !bytes.Contains(r.Error.Server, []byte(spec.Fingerprint)) {
		t.Fatalf("fingerprint-changed must carry the current entry: %s", r)
	}
	r = req(3, map[string]any{"server": "fake", "fingerprint": spec.Fingerprint})
	mustErr(t, r, bridge.CodeConfirmationRequired)
	r = req(4, map[string]any{"server": "nope", "fingerprint": "x", "confirmed": true})
	mustErr(t, r, bridge.CodeUnknownServer)

	r = req(5, map[string]any{"server": "fake", "fingerprint": spec.Fingerprint, "confirmed": true})
	mustOK(t, r)
	approval := r.Str("approval")

	p2 := h.page(ctx)
	r, _ = p2.Request(ctx, map[string]any{"type": "tools:connect", "id": 1, "server": "fake", "fingerprint": spec.Fingerprint, "approval": approval})
	mustOK(t, r)
	r, _ = p2.Request(ctx, map[string]any{"type": "tools:connect", "id": 2, "server": "other", "fingerprint": other.Fingerprint, "approval": approval})
	mustErr(t, r, bridge.CodeConfirmationRequired)
	r, _ = p2.Request(ctx, map[string]any{"type": "tools:connect", "id": 3, "server": "fake", "fingerprint": spec.Fingerprint, "approval": approval + "x"})
	mustErr(t, r, bridge.CodeConfirmationRequired)
}

func TestSharedSessionAndIsolation(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	j := journal(t)
	spec := fakeServer(t, "fake", bridgetest.Mode{Journal: j})
	h := newHarness(t, bridge.Options{}, spec)
	const tabs = 4
	pages := make([]*bridgetest.Page, tabs)
	for i := range pages {
		pages[i] = h.page(ctx)
		connect(t, ctx, pages[i], "c", spec)
	}
	// Every tab runs slow calls with the same ids; odd calls are cancelled.
	var wg sync.WaitGroup
	for i, p := range pages {
		wg.Add(1)
		go func(i int, p *bridgetest.Page) {
			defer wg.Done()
			for k := 0; k < 4; k++ {
				tag := fmt.Sprintf("tab%d-call%d", i, k)
				id := k // the same ids in every tab
				// A call to be cancelled is slow enough that its cancel,
				// sent at its first progress, comes before its end however
				// loaded the machine is; it costs no time, being cancelled.
				interval := 30
				if k%2 == 1 {
					interval = 500
				}
				if err := p.Send(map[string]any{"type": "tools:call", "id": id, "server": "fake", "tool": "slow",
					"arguments": map[string]any{"steps": 4, "intervalMs": interval, "tag": tag}}); err != nil {
					t.Error(err)
					return
				}
				if k%2 == 1 {
					if _, err := p.Wait(ctx, func(m *bridgetest.Msg) bool {
						return m.Type == "tools:progress" && string(m.ID) == strconv.Itoa(id)
					}); err != nil {
						t.Error(err)
						return
					}
					p.Send(map[string]any{"type": "tools:cancel", "id": id})
				}
				r, err := p.Reply(ctx, "tools:call", id)
				if err != nil {
					t.Error(err)
					return
				}
				if k%2 == 1 {
					if r.Error == nil || r.Error.Code != bridge.CodeCancelled {
						t.Errorf("%s: want cancelled, got %s", tag, r)
					}
					continue
				}
				if !strings.Contains(string(r.Fields["result"]), tag) {
					t.Errorf("%s: result of another call: %s", tag, r.Fields["result"])
				}
			}
		}(i, p)
	}
	wg.Wait()
	for i, p := range pages {
		for _, m := range p.All() {
			if m.Type == "tools:progress" && m.Fields["message"] != nil && !strings.Contains(m.Str("message"), fmt.Sprintf("tab%d-", i)) {
				t.Errorf("tab %d got another tab's progress: %s", i, m)
			}
			if m.Type == "tools:call" && m.Fields["result"] != nil && !strings.Contains(string(m.Fields["result"]), fmt.Sprintf("tab%d-", i)) {
				t.Errorf("tab %d got another tab's result: %s", i, m)
			}
		}
	}
	// go-sdk sends notifications/cancelled just after the call returns: wait for them.
	waitFor(t, 10*time.Second, fmt.Sprintf("%d notifications/cancelled upstream", tabs*2), func() bool {
		return countOf(journalMethods(t, j), "notifications/cancelled") >= tabs*2
	})
	methods := checkJournal(t, j)
	if n := countOf(methods, "initialize"); n != 1 {
		t.Errorf("tabs must share one session: %d initialize", n)
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

func TestTimeout(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	j := journal(t)
	spec := fakeServer(t, "fake", bridgetest.Mode{Journal: j})
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": "fake", "tool": "slow",
		"arguments": map[string]any{"steps": 100, "intervalMs": 50, "tag": "t"}, "timeoutMs": 300})
	if err != nil {
		t.Fatal(err)
	}
	mustErr(t, r, bridge.CodeTimeout)
	waitFor(t, 5*time.Second, "notifications/cancelled upstream", func() bool {
		return countOf(journalMethods(t, j), "notifications/cancelled") == 1
	})
}

// TestTimeoutBeyondDuration: a timeoutMs past what a time.Duration holds
// (valid JSON up to 1.8e308) is the longest call allowed
// (Options.CallTimeoutMax), not a negative duration that timed the call out
// before it was sent.
func TestTimeoutBeyondDuration(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	spec := fakeServer(t, "fake", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{CallTimeoutMax: 700 * time.Millisecond}, spec)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	id := 10
	for _, ms := range []float64{1e308, math.MaxFloat64, 9.3e15, 1e13, float64(math.MaxInt64) / 1e6} {
		t.Run(strconv.FormatFloat(ms, 'g', -1, 64), func(t *testing.T) {
			id++
			r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": id, "server": "fake", "tool": "echo",
				"arguments": map[string]any{"a": 1}, "timeoutMs": ms})
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, r)
			id++
			r, err = p.Request(ctx, map[string]any{"type": "tools:call", "id": id, "server": "fake", "tool": "slow",
				"arguments": map[string]any{"steps": 1000, "intervalMs": 50, "tag": "t"}, "timeoutMs": ms})
			if err != nil {
				t.Fatal(err)
			}
			mustErr(t, r, bridge.CodeTimeout)
			if !strings.Contains(r.Error.Message, "did not finish within 700ms") {
				t.Fatalf("the call was not given the longest time allowed: %s", r.Error.Message)
			}
		})
	}
}

func TestCrashMidCall(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	spec := fakeServer(t, "crashy", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{}, spec)
	p1, p2 := h.page(ctx), h.page(ctx)
	connect(t, ctx, p1, 1, spec)
	connect(t, ctx, p2, 1, spec)
	p2.Send(map[string]any{"type": "tools:call", "id": 7, "server": "crashy", "tool": "slow",
		"arguments": map[string]any{"steps": 1000, "intervalMs": 50, "tag": "x"}})
	r, err := p1.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": "crashy", "tool": "crash", "arguments": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	mustErr(t, r, bridge.CodeServerFailed)
	if !strings.Contains(r.Error.Message, "simulated crash") || !strings.Contains(r.Error.Message, "crashy") {
		t.Fatalf("the error must name the server and carry its last stderr line: %q", r.Error.Message)
	}
	r2, err := p2.Reply(ctx, "tools:call", 7)
	if err != nil {
		t.Fatal(err)
	}
	mustErr(t, r2, bridge.CodeServerFailed)
	for _, p := range []*bridgetest.Page{p1, p2} {
		cl, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:closed" })
		if err != nil {
			t.Fatal(err)
		}
		if cl.Str("server") != "crashy" || cl.Str("message") == "" {
			t.Fatalf("tools:closed: %s", cl)
		}
	}
	r, _ = p1.Request(ctx, map[string]any{"type": "tools:servers", "id": "s"})
	if sv := string(r.Fields["servers"]); !strings.Contains(sv, `"state":"failed"`) || !strings.Contains(sv, "simulated crash") {
		t.Fatalf("after tools:closed, tools:servers must show the failure and why: %s", sv)
	}
	r, _ = p1.Request(ctx, map[string]any{"type": "tools:call", "id": 3, "server": "crashy", "tool": "echo", "arguments": map[string]any{}})
	mustErr(t, r, bridge.CodeNotConnected)
	// The next connect starts it again.
	connect(t, ctx, p1, 4, spec)
	r, _ = p1.Request(ctx, map[string]any{"type": "tools:call", "id": 5, "server": "crashy", "tool": "echo", "arguments": map[string]any{}})
	mustOK(t, r)
}

func TestJunkOnStdout(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	spec := fakeServer(t, "noisy", bridgetest.Mode{Banner: bridgetest.DefaultJunk(), JunkEveryN: 1})
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	for i := 0; i < 5; i++ {
		r, _ := p.Request(ctx, map[string]any{"type": "tools:call", "id": 10 + i, "server": "noisy", "tool": "echo", "arguments": map[string]any{"i": i}})
		mustOK(t, r)
	}
}

func TestResultOverLimit(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	spec := fakeServer(t, "big", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{ResultLimit: 1 << 20}, spec)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	r, _ := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": "big", "tool": "big", "arguments": map[string]any{"bytes": 8 << 20}})
	mustErr(t, r, bridge.CodeTooLargeErr)
	if r.Error.Limit != 1<<20 {
		t.Fatalf("too-large must state the limit: %s", r)
	}
	r, _ = p.Request(ctx, map[string]any{"type": "tools:call", "id": 3, "server": "big", "tool": "big", "arguments": map[string]any{"bytes": 100 << 10}})
	mustOK(t, r)
	r, _ = p.Request(ctx, map[string]any{"type": "tools:call", "id": 4, "server": "big", "tool": "echo", "arguments": map[string]any{}})
	mustOK(t, r)
}

func TestChunkedReplyAndRequest(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	spec := fakeServer(t, "big", bridgetest.Mode{})
	const frameLimit = 64 << 10
	h := newHarness(t, bridge.Options{FrameLimit: frameLimit}, spec)
	p := h.page(ctx)
	p.FrameLimit = frameLimit
	connect(t, ctx, p, 1, spec)
	r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": "big", "tool": "big", "arguments": map[string]any{"bytes": 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	if len(r.Fields["result"]) < 1<<20-1024 {
		t.Fatalf("result too small: %d bytes", len(r.Fields["result"]))
	}
	if max, frames := p.MaxFrame(); max > frameLimit || frames < 16 {
		t.Fatalf("largest frame %d (limit %d), %d frames", max, frameLimit, frames)
	}
	// A chunked request: a large argument with multi-byte characters and
	// characters JSON must escape, echoed back exactly.
	big := strings.Repeat("Å\"\\\n€ ", 40000)
	r, err = p.Request(ctx, map[string]any{"type": "tools:call", "id": 3, "server": "big", "tool": "echo", "arguments": map[string]any{"doc": big}})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	var res struct {
		StructuredContent struct {
			Echo struct{ Doc string } `json:"echo"`
		} `json:"structuredContent"`
	}
	json.Unmarshal(r.Fields["result"], &res)
	if res.StructuredContent.Echo.Doc != big {
		t.Fatalf("the chunked argument did not arrive intact (%d vs %d bytes)", len(res.StructuredContent.Echo.Doc), len(big))
	}
}

func TestMalformedChunks(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	h := newHarness(t, bridge.Options{InboundLimit: 1 << 20})
	p := h.page(ctx)
	frame := func(id any, seq, count, size int, data string) map[string]any {
		return map[string]any{"type": "tools:chunk", "id": id, "seq": seq, "count": count, "size": size, "data": data}
	}
	servers := `{"type":"tools:servers","id":"x"}`
	cases := []struct {
		name   string
		frames []map[string]any
		code   string
	}{
		{"starts past zero", []map[string]any{frame("a", 1, 2, len(servers), servers)}, bridge.CodeBadRequest},
		{"gap", []map[string]any{frame("b", 0, 3, len(servers), servers[:5]), frame("b", 2, 3, len(servers), servers[5:])}, bridge.CodeBadRequest},
		{"repeat", []map[string]any{frame("c", 0, 2, len(servers), servers[:5]), frame("c", 0, 2, len(servers), servers[:5])}, bridge.CodeBadRequest},
		{"count changes", []map[string]any{frame("d", 0, 2, len(servers), servers[:5]), frame("d", 1, 3, len(servers), servers[5:])}, bridge.CodeBadRequest},
		{"more than size", []map[string]any{frame("e", 0, 2, 10, servers[:5]), frame("e", 1, 2, 10, servers[5:])}, bridge.CodeBadRequest},
		{"less than size", []map[string]any{frame("f", 0, 2, 100, servers[:5]), frame("f", 1, 2, 100, servers[5:])}, bridge.CodeBadRequest},
		{"over the inbound limit", []map[string]any{frame("g", 0, 2, 2<<20, "x")}, bridge.CodeTooLargeErr},
		{"missing data", []map[string]any{{"type": "tools:chunk", "id": "h", "seq": 0, "count": 1, "size": 1}}, bridge.CodeBadRequest},
		{"chunk in a chunk", []map[string]any{frame("i", 0, 1, 44, `{"type":"tools:chunk","id":"j","seq":0,"x":1}`)}, bridge.CodeBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, f := range tc.frames {
				if err := p.Send(f); err != nil {
					t.Fatal(err)
				}
			}
			m, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.OK != nil && !*m.OK })
			if err != nil {
				t.Fatal(err)
			}
			mustErr(t, m, tc.code)
			// The socket still works.
			r, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": tc.name})
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, r)
		})
	}
	// Too many open sequences.
	for i := 0; i < 5; i++ {
		p.Send(frame(fmt.Sprintf("open%d", i), 0, 2, len(servers), servers[:5]))
	}
	m, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.OK != nil && !*m.OK })
	if err != nil {
		t.Fatal(err)
	}
	mustErr(t, m, bridge.CodeBadRequest)
	if string(m.ID) != `"open4"` {
		t.Fatalf("the fifth sequence must be refused: %s", m)
	}
	// A sequence carrying a whole message works (on a fresh page: this one
	// still has four sequences open).
	p = h.page(ctx)
	for i, piece := range []string{servers[:10], servers[10:]} {
		p.Send(frame("ok", i, 2, len(servers), piece))
	}
	r, err := p.Reply(ctx, "tools:servers", "x")
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
}

func TestBadInput(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	j := journal(t)
	spec := fakeServer(t, "fake", bridgetest.Mode{Journal: j})
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)
	connect(t, ctx, p, "c", spec)
	cases := []struct {
		name  string
		frame string
		code  string
	}{
		{"not json", `hello`, bridge.CodeBadRequest},
		{"array", `[1,2]`, bridge.CodeBadRequest},
		{"truncated", `{"type":"tools:servers","id":`, bridge.CodeBadRequest},
		{"no type", `{"id":1}`, bridge.CodeBadRequest},
		{"type not a string", `{"type":5,"id":1}`, bridge.CodeBadRequest},
		{"no id", `{"type":"tools:servers"}`, bridge.CodeBadRequest},
		{"id an object", `{"type":"tools:servers","id":{"a":1}}`, bridge.CodeBadRequest},
		{"unknown type", `{"type":"tools:explode","id":1}`, bridge.CodeUnknownType},
		{"raw resources/read", `{"type":"resources/read","id":1,"params":{"uri":"file:///etc/passwd"}}`, bridge.CodeUnknownType},
		{"raw prompts/get", `{"jsonrpc":"2.0","type":"prompts/get","id":2,"method":"prompts/get"}`, bridge.CodeUnknownType},
		{"raw sampling", `{"type":"sampling/createMessage","id":3}`, bridge.CodeUnknownType},
		{"jsonrpc without type", `{"jsonrpc":"2.0","id":4,"method":"resources/read"}`, bridge.CodeBadRequest},
		{"connect without server", `{"type":"tools:connect","id":5}`, bridge.CodeBadRequest},
		{"server of wrong type", `{"type":"tools:connect","id":6,"server":5}`, bridge.CodeBadRequest},
		{"call without tool", `{"type":"tools:call","id":7,"server":"fake"}`, bridge.CodeBadRequest},
		{"arguments not an object", `{"type":"tools:call","id":8,"server":"fake","tool":"echo","arguments":[1]}`, bridge.CodeBadRequest},
		{"negative timeout", `{"type":"tools:call","id":9,"server":"fake","tool":"echo","timeoutMs":-1}`, bridge.CodeBadRequest},
		{"call to an unlisted tool", `{"type":"tools:call","id":10,"server":"fake","tool":"resources/read"}`, bridge.CodeUnknownTool},
		{"call to an unconnected server", `{"type":"tools:call","id":11,"server":"other","tool":"echo"}`, bridge.CodeNotConnected},
		{"method smuggled in a call", `{"type":"tools:call","id":12,"server":"fake","tool":"echo","method":"resources/read","arguments":{"method":"prompts/get"}}`, ""},
		{"disconnect unconnected", `{"type":"tools:disconnect","id":13,"server":"other"}`, bridge.CodeNotConnected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := p.SendFrame([]byte(tc.frame)); err != nil {
				t.Fatal(err)
			}
			m, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.OK != nil })
			if err != nil {
				t.Fatal(err)
			}
			if tc.code == "" {
				mustOK(t, m)
				return
			}
			mustErr(t, m, tc.code)
		})
	}
	t.Run("id reused while in flight", func(t *testing.T) {
		p.Send(map[string]any{"type": "tools:call", "id": "dup", "server": "fake", "tool": "slow", "arguments": map[string]any{"steps": 50, "intervalMs": 20, "tag": "d"}})
		p.Send(map[string]any{"type": "tools:call", "id": "dup", "server": "fake", "tool": "echo", "arguments": map[string]any{}})
		m, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.OK != nil && !*m.OK })
		if err != nil {
			t.Fatal(err)
		}
		mustErr(t, m, bridge.CodeBadRequest)
		p.Send(map[string]any{"type": "tools:cancel", "id": "dup"})
		r, _ := p.Reply(ctx, "tools:cancel", "dup")
		if r.Str("cancelled") != "" || string(r.Fields["cancelled"]) != "true" {
			t.Fatalf("cancel reply: %s", r)
		}
	})
	t.Run("binary frame closes with 4400", func(t *testing.T) {
		p2 := h.page(ctx)
		p2.Conn.WriteMessage(websocket.BinaryMessage, []byte{1, 2, 3})
		<-p2.Done()
		if ce := p2.CloseError(); ce == nil || ce.Code != bridge.CloseBinary {
			t.Fatalf("want close 4400, got %v", p2.Err())
		}
		all := p2.All()
		if len(all) == 0 || all[len(all)-1].Type != "tools:closing" || string(all[len(all)-1].Fields["code"]) != "4400" {
			t.Fatalf("want tools:closing with code 4400 before the close")
		}
	})
	checkJournal(t, j)
}

func TestTabDropsMidCall(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	j := journal(t)
	spec := fakeServer(t, "fake", bridgetest.Mode{Journal: j})
	h := newHarness(t, bridge.Options{}, spec)
	p1, p2 := h.page(ctx), h.page(ctx)
	connect(t, ctx, p1, 1, spec)
	connect(t, ctx, p2, 1, spec)
	p1.Send(map[string]any{"type": "tools:call", "id": 2, "server": "fake", "tool": "slow", "arguments": map[string]any{"steps": 200, "intervalMs": 20, "tag": "p1"}})
	p2.Send(map[string]any{"type": "tools:call", "id": 2, "server": "fake", "tool": "slow", "arguments": map[string]any{"steps": 10, "intervalMs": 20, "tag": "p2"}})
	if _, err := p1.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" }); err != nil {
		t.Fatal(err)
	}
	p1.Drop()
	waitFor(t, 5*time.Second, "the dropped tab's call to be cancelled upstream", func() bool {
		return countOf(journalMethods(t, j), "notifications/cancelled") == 1
	})
	r, err := p2.Reply(ctx, "tools:call", 2)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	if !strings.Contains(string(r.Fields["result"]), "p2") {
		t.Fatalf("p2 result: %s", r)
	}
}

func TestGrandchildStopped(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	pidFile := t.TempDir() + "/grandchild.pid"
	spec := fakeServer(t, "wrapper", bridgetest.Mode{SpawnGrandchild: true, GrandchildPidFile: pidFile})
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	var pid int
	waitFor(t, 5*time.Second, "the grandchild's pid", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	if !childtest.Running(pid) {
		t.Fatalf("grandchild %d not running", pid)
	}
	r, _ := p.Request(ctx, map[string]any{"type": "tools:disconnect", "id": 2, "server": "wrapper"})
	mustOK(t, r)
	waitFor(t, 10*time.Second, "the grandchild to be gone", func() bool { return !childtest.Running(pid) })
}

func TestListChanged(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	spec := fakeServer(t, "fake", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	r, _ := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": "fake", "tool": "added", "arguments": map[string]any{}})
	mustErr(t, r, bridge.CodeUnknownTool)
	r, _ = p.Request(ctx, map[string]any{"type": "tools:call", "id": 3, "server": "fake", "tool": "listchanged", "arguments": map[string]any{}})
	mustOK(t, r)
	waitFor(t, 5*time.Second, "the new tool to be callable", func() bool {
		r, _ := p.Request(ctx, map[string]any{"type": "tools:call", "id": "x", "server": "fake", "tool": "added", "arguments": map[string]any{}})
		return r.OK != nil && *r.OK
	})
}

func TestConnectProgressAndGiveUp(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	spec := fakeServer(t, "hang", bridgetest.Mode{HangInit: true, StderrFlood: 300})
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)
	p.Send(map[string]any{"type": "tools:connect", "id": 1, "server": "hang", "fingerprint": spec.Fingerprint, "confirmed": true})
	pr, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" && string(m.ID) == "1" })
	if err != nil {
		t.Fatal(err)
	}
	if pr.Str("message") == "" {
		t.Fatalf("connect progress must carry the latest stderr line: %s", pr)
	}
	p.Send(map[string]any{"type": "tools:cancel", "id": 1})
	r, err := p.Reply(ctx, "tools:connect", 1)
	if err != nil {
		t.Fatal(err)
	}
	mustErr(t, r, bridge.CodeCancelled)
	waitFor(t, 10*time.Second, "the abandoned start to stop", func() bool {
		r, _ := p.Request(ctx, map[string]any{"type": "tools:servers", "id": "s"})
		var servers []map[string]any
		json.Unmarshal(r.Fields["servers"], &servers)
		return servers[0]["state"] != "starting"
	})
}

func TestExitBeforeInit(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	spec := fakeServer(t, "dies", bridgetest.Mode{ExitBeforeInit: true})
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)
	r, _ := p.Request(ctx, map[string]any{"type": "tools:connect", "id": 1, "server": "dies", "fingerprint": spec.Fingerprint, "confirmed": true})
	mustErr(t, r, bridge.CodeServerFailed)
	// The person reads what happened first, not go-sdk's wrapping
	// ("connection closed: calling "initialize": client is closing: ...").
	if !strings.HasPrefix(r.Error.Message, "dies exited with status 2") || !strings.Contains(r.Error.Message, "simulated failure before initialize") {
		t.Fatalf("message must start with the server's name and its exit status, then its last stderr line: %q", r.Error.Message)
	}
	r, _ = p.Request(ctx, map[string]any{"type": "tools:servers", "id": 2})
	if !strings.Contains(string(r.Fields["servers"]), `"state":"failed"`) || !strings.Contains(string(r.Fields["servers"]), `simulated failure before initialize`) {
		t.Fatalf("tools:servers must show the failure and the stderr tail: %s", r.Fields["servers"])
	}
}

func TestOpenSettingsAndProblems(t *testing.T) {
	ctx := testCtx(t, 10*time.Second)
	h := newHarness(t, bridge.Options{Catalog: bridge.StaticCatalog{
		Problems: []bridge.Problem{{File: "/etc/jupyter/jupyter_server_config.json", Server: "bad", Message: "bad: command must be a string"}},
		Settings: bridge.Settings{Files: []bridge.SettingsFile{{Path: "/etc/jupyter/jupyter_server_config.json", Exists: true, Level: "system"}},
			UserFile: &bridge.SettingsFile{Path: "/home/u/.jupyter/jupyter_server_config.json", Level: "user"}},
	}})
	p := h.page(ctx)
	r, _ := p.Request(ctx, map[string]any{"type": "tools:openSettings", "id": 1})
	mustOK(t, r)
	if !strings.Contains(string(r.Fields["userFile"]), "/home/u/.jupyter/jupyter_server_config.json") || !strings.Contains(string(r.Fields["files"]), `"exists":true`) {
		t.Fatalf("openSettings: %s", r)
	}
	r, _ = p.Request(ctx, map[string]any{"type": "tools:servers", "id": 2})
	if !strings.Contains(string(r.Fields["problems"]), "command must be a string") {
		t.Fatalf("problems: %s", r)
	}
}

func TestSilentSocketDropped(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	j := journal(t)
	spec := fakeServer(t, "fake", bridgetest.Mode{Journal: j})
	h := newHarness(t, bridge.Options{PingInterval: 100 * time.Millisecond, PongTimeout: 700 * time.Millisecond}, spec)
	// A page that answers pings (it reads) stays open.
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	// A raw client that never reads cannot answer pings: it is dropped, and
	// its call is cancelled upstream.
	conn, _, err := websocket.DefaultDialer.Dial(h.wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msg, _ := json.Marshal(map[string]any{"type": "tools:connect", "id": 1, "server": "fake", "fingerprint": spec.Fingerprint, "confirmed": true})
	conn.WriteMessage(websocket.TextMessage, msg)
	// Read until the connect is answered, then never read again.
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for the silent socket's connect reply: %v", err)
		}
		var m struct {
			Type string          `json:"type"`
			ID   json.RawMessage `json:"id"`
			OK   bool            `json:"ok"`
		}
		if json.Unmarshal(data, &m) == nil && m.Type == "tools:connect" && string(m.ID) == "1" {
			if !m.OK {
				t.Fatalf("the silent socket's connect failed: %s", data)
			}
			break
		}
	}
	conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"tools:call","id":2,"server":"fake","tool":"slow","arguments":{"steps":1000,"intervalMs":10,"tag":"silent"}}`))
	waitFor(t, 10*time.Second, "the silent socket's call to be cancelled", func() bool {
		return countOf(journalMethods(t, j), "notifications/cancelled") == 1
	})
	r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 3, "server": "fake", "tool": "echo", "arguments": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
}

func TestConfigChangeNewFingerprint(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	j := journal(t)
	v1 := fakeServer(t, "lab", bridgetest.Mode{Journal: j, Version: "1"})
	v2 := fakeServer(t, "lab", bridgetest.Mode{Journal: j, Version: "2"})
	v2.Fingerprint = v1.Fingerprint + "-v2"
	var mu sync.Mutex
	current := v1
	h := newHarness(t, bridge.Options{Catalog: bridge.CatalogFunc(func(context.Context) bridge.Snapshot {
		mu.Lock()
		defer mu.Unlock()
		return bridge.Snapshot{Servers: []bridge.ServerSpec{current}}
	})})
	p := h.page(ctx)
	c := connect(t, ctx, p, 1, v1)
	if !strings.Contains(string(c.Fields["serverInfo"]), `"version":"1"`) {
		t.Fatalf("serverInfo: %s", c.Fields["serverInfo"])
	}
	mu.Lock()
	current = v2
	mu.Unlock()
	// tools:servers shows what the tab is using: the old definition's
	// session, connected, under the entry as it is now listed. Before, the
	// entry was listed stopped and not connected while the tab's calls
	// still went to the old session.
	ls, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": "ls"})
	if err != nil {
		t.Fatal(err)
	}
	var listed struct {
		Servers []struct {
			Fingerprint, State string
			Connected          bool
			InUse              *struct{ Fingerprint string }
		}
	}
	if err := json.Unmarshal(ls.Raw, &listed); err != nil || len(listed.Servers) != 1 {
		t.Fatalf("tools:servers: %v %s", err, ls.Raw)
	}
	if v := listed.Servers[0]; v.Fingerprint != v2.Fingerprint || !v.Connected || v.State != "connected" || v.InUse == nil || v.InUse.Fingerprint != v1.Fingerprint {
		t.Fatalf("after the entry changed, tools:servers lists %s; want the new fingerprint, connected, state connected, inUse the old definition", ls.Raw)
	}
	// The page still holds the old definition's session until it connects again.
	r, _ := p.Request(ctx, map[string]any{"type": "tools:connect", "id": 2, "server": "lab", "fingerprint": v1.Fingerprint, "confirmed": true})
	mustErr(t, r, bridge.CodeFingerprintChanged)
	c = connect(t, ctx, p, 3, v2)
	if !strings.Contains(string(c.Fields["serverInfo"]), `"version":"2"`) {
		t.Fatalf("the changed entry must get a new session: %s", c.Fields["serverInfo"])
	}
	if n := countOf(journalMethods(t, j), "initialize"); n != 2 {
		t.Fatalf("want 2 initialize (one per definition), got %d", n)
	}
}

// TestRemovedServer: an entry is removed from the configuration while a tab
// holds its session, with a call in flight. Within the recheck interval the
// next call is refused with the code a connect gets for an unknown (or now
// excluded) server, and never reaches the server; a connect is refused at
// once; the call in flight finishes. Once the tab disconnects, the
// session's process is stopped after the grace period (by /proc), not
// before.
func TestRemovedServer(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	j := journal(t)
	spec, marker := faultServer(t, "gone", bridgetest.Mode{Journal: j})
	var mu sync.Mutex
	servers, forbidden := []bridge.ServerSpec{spec}, map[string]string(nil)
	setConfig := func(s []bridge.ServerSpec, f map[string]string) {
		mu.Lock()
		servers, forbidden = s, f
		mu.Unlock()
	}
	const grace = time.Second
	const recheck = 300 * time.Millisecond
	h := newHarness(t, bridge.Options{IdleGrace: grace, ConfigRecheck: recheck, Catalog: bridge.CatalogFunc(func(context.Context) bridge.Snapshot {
		mu.Lock()
		defer mu.Unlock()
		return bridge.Snapshot{Servers: servers, Forbidden: forbidden}
	})})
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	p.Send(map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "tool": "slow",
		"arguments": map[string]any{"steps": 100, "intervalMs": 50, "tag": "inflight"}})
	if _, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" && string(m.ID) == "2" }); err != nil {
		t.Fatal(err)
	}

	// Calls go through until the bridge reads the configuration again.
	answered := 0
	polls := 0
	refusedWithin := func(code string, bound time.Duration) *bridgetest.Msg {
		t.Helper()
		start := time.Now()
		for {
			polls++
			r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": fmt.Sprint("poll-", polls), "server": spec.Name, "tool": "echo", "arguments": map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case r.OK != nil && *r.OK:
				answered++
			case r.Error != nil && r.Error.Code == code:
				return r
			case r.Error == nil || r.Error.Code != bridge.CodeUnknownServer:
				t.Fatalf("while waiting for %s: %s", code, r)
			}
			if time.Since(start) > bound {
				t.Fatalf("calls were not refused with %s within %s of the change", code, bound)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	setConfig(nil, nil)
	// The entry is removed while the call is in flight (it has just sent
	// its first progress and runs 5 s); what happens after that, however
	// long the refusals below take, does not matter to this.
	for _, m := range p.All() {
		if m.Type == "tools:call" && string(m.ID) == "2" {
			t.Fatalf("the call was answered before the entry was removed: %s", m)
		}
	}
	r := refusedWithin(bridge.CodeUnknownServer, recheck+2*time.Second)
	mustErr(t, r, bridge.CodeUnknownServer)
	if !strings.Contains(r.Error.Message, spec.Name) || !strings.Contains(r.Error.Message, "removed") {
		t.Errorf("the refusal must say the server was removed: %q", r.Error.Message)
	}
	r, _ = p.Request(ctx, map[string]any{"type": "tools:connect", "id": 4, "server": spec.Name, "fingerprint": spec.Fingerprint, "confirmed": true})
	mustErr(t, r, bridge.CodeUnknownServer)
	// Defined but now excluded by the admin: the admin's reason.
	setConfig(nil, map[string]string{spec.Name: spec.Name + " is excluded by the admin's settings"})
	r = refusedWithin(bridge.CodeForbidden, recheck+2*time.Second)
	mustErr(t, r, bridge.CodeForbidden)
	if !strings.Contains(r.Error.Message, "admin") {
		t.Errorf("the refusal must give the admin's reason: %q", r.Error.Message)
	}
	setConfig(nil, nil)
	t.Logf("%d calls went through before the change was seen", answered)

	r, err := p.Reply(ctx, "tools:call", 2)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	if !strings.Contains(string(r.Fields["result"]), "inflight") {
		t.Fatalf("the call in flight must finish with its result: %s", r)
	}
	if calls := countOf(checkJournal(t, j), "tools/call"); calls != 1+answered {
		t.Fatalf("the server received %d tools/call, want %d: the refused calls must not reach it", calls, 1+answered)
	}
	if len(procsMarked(marker)) == 0 {
		t.Fatal("the session was stopped while the tab still held it")
	}

	r, _ = p.Request(ctx, map[string]any{"type": "tools:disconnect", "id": 6, "server": spec.Name})
	mustOK(t, r)
	released := time.Now()
	noneLeft(t, marker, grace+10*time.Second)
	if el := time.Since(released); el < grace-100*time.Millisecond {
		t.Errorf("the session was stopped %s after the last tab released it, before the grace period of %s", el.Round(time.Millisecond), grace)
	}
	if n := countOf(checkJournal(t, j), "initialize"); n != 1 {
		t.Errorf("want one session (1 initialize), got %d", n)
	}
}

func TestForbiddenServer(t *testing.T) {
	ctx := testCtx(t, 10*time.Second)
	h := newHarness(t, bridge.Options{Catalog: bridge.StaticCatalog{
		Forbidden: map[string]string{"my-tools": "my-tools is configured in /home/a/.jupyter/jupyter_server_config.json, but the admin allows only servers from env and system configuration"},
	}})
	p := h.page(ctx)
	r, _ := p.Request(ctx, map[string]any{"type": "tools:connect", "id": 1, "server": "my-tools", "fingerprint": "x", "confirmed": true})
	mustErr(t, r, bridge.CodeForbidden)
	if !strings.Contains(r.Error.Message, "admin") {
		t.Fatalf("message: %q", r.Error.Message)
	}
	r, _ = p.Request(ctx, map[string]any{"type": "tools:connect", "id": 2, "server": "other", "fingerprint": "x", "confirmed": true})
	mustErr(t, r, bridge.CodeUnknownServer)
}

func TestBusy(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	spec := fakeServer(t, "fake", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{MaxCallsPerTab: 2, MaxCallsPerServer: 3}, spec)
	p1, p2 := h.page(ctx), h.page(ctx)
	connect(t, ctx, p1, 1, spec)
	connect(t, ctx, p2, 1, spec)
	slow := map[string]any{"steps": 1000, "intervalMs": 20, "tag": "b"}
	for _, id := range []int{10, 11} {
		p1.Send(map[string]any{"type": "tools:call", "id": id, "server": "fake", "tool": "slow", "arguments": slow})
		if _, err := p1.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" && string(m.ID) == fmt.Sprint(id) }); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := p1.Request(ctx, map[string]any{"type": "tools:call", "id": 12, "server": "fake", "tool": "echo", "arguments": map[string]any{}})
	mustErr(t, r, bridge.CodeBusy)
	p2.Send(map[string]any{"type": "tools:call", "id": 20, "server": "fake", "tool": "slow", "arguments": slow})
	if _, err := p2.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" }); err != nil {
		t.Fatal(err)
	}
	r, _ = p2.Request(ctx, map[string]any{"type": "tools:call", "id": 21, "server": "fake", "tool": "echo", "arguments": map[string]any{}})
	mustErr(t, r, bridge.CodeBusy)
	p1.Send(map[string]any{"type": "tools:cancel", "id": 10})
	p1.Reply(ctx, "tools:call", 10)
	// Once the cancelled call has left the server, there is room again.
	n := 0
	waitFor(t, 5*time.Second, "room for a call after a cancel", func() bool {
		n++
		r, _ := p2.Request(ctx, map[string]any{"type": "tools:call", "id": fmt.Sprint("retry", n), "server": "fake", "tool": "echo", "arguments": map[string]any{}})
		return r.OK != nil && *r.OK
	})
}
