package bridge_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

var update = flag.Bool("update", false, "rewrite the examples in PROTOCOL.md from this run")

// TestProtocolDocument runs one real exchange of every message, and checks
// that PROTOCOL.md shows an example of each with the same fields, and lists
// every error code and close code the bridge uses. With -update it rewrites
// the examples from the run.
func TestProtocolDocument(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	spec := fakeServer(t, "lab-tools", bridgetest.Mode{
		ServerInfo:   json.RawMessage(`{"name":"lab-tools","title":"Lab tools","version":"1.0.0","websiteUrl":"https://tools.example.org/","icons":[{"src":"data:image/svg+xml;base64,PHN2Zy8+","mimeType":"image/svg+xml"}]}`),
		Instructions: "Build the box first; lengths are in nm.",
	})
	spec.Env["LAB_TOOLS_HOME"] = "/opt/lab-tools"
	spec.Source = "/home/alice/.jupyter/jupyter_server_config.json"
	spec.Fingerprint = "sha256:6f1c0e2b9d4a7c35e8b1f0a2d3c4b5a697887766554433221100ffeeddccbbaa"
	user := bridge.SettingsFile{Path: "/home/alice/.jupyter/jupyter_server_config.json", Exists: true, Level: "user"}
	h := newHarness(t, bridge.Options{FrameLimit: 4096, Catalog: bridge.StaticCatalog{
		Servers: []bridge.ServerSpec{spec},
		Problems: []bridge.Problem{{File: "/etc/jupyter/jupyter_server_config.json", Server: "old-tools",
			Key: "MeganeBuilderTools.mcp_servers.old-tools.url", Message: "old-tools: url must use https unless the host is loopback"}},
		Settings: bridge.Settings{Files: []bridge.SettingsFile{user}, UserFile: &user},
	}}, spec)
	p := h.page(ctx)
	p.FrameLimit = 4096
	examples := map[string][]byte{}
	sent := func(label string, v map[string]any) map[string]any {
		b, _ := json.Marshal(v)
		examples[label] = b
		return v
	}
	got := func(label string, m *bridgetest.Msg, err error) *bridgetest.Msg {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		examples[label] = m.Raw
		return m
	}
	r, err := p.Request(ctx, sent("tools:servers request", map[string]any{"type": "tools:servers", "id": 1}))
	got("tools:servers reply", r, err)
	r, err = p.Request(ctx, map[string]any{"type": "tools:connect", "id": 2, "server": "lab-tools"})
	got("error reply", r, err)
	r, err = p.Request(ctx, sent("tools:connect request", map[string]any{"type": "tools:connect", "id": 3, "server": "lab-tools", "fingerprint": spec.Fingerprint, "confirmed": true}))
	got("tools:connect reply", r, err)
	mustOK(t, r)
	r, err = p.Request(ctx, sent("tools:call request", map[string]any{"type": "tools:call", "id": 4, "server": "lab-tools", "tool": "slow", "arguments": map[string]any{"steps": 2, "intervalMs": 10, "tag": "box"}, "timeoutMs": 60000}))
	got("tools:call reply", r, err)
	m, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" && string(m.ID) == "4" })
	got("tools:progress", m, err)
	p.Send(map[string]any{"type": "tools:call", "id": 5, "server": "lab-tools", "tool": "slow", "arguments": map[string]any{"steps": 100, "intervalMs": 50, "tag": "long"}})
	if _, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" && string(m.ID) == "5" }); err != nil {
		t.Fatal(err)
	}
	p.Send(sent("tools:cancel request", map[string]any{"type": "tools:cancel", "id": 5}))
	m, err = p.Reply(ctx, "tools:call", 5)
	got("tools:cancel call reply", m, err)
	m, err = p.Reply(ctx, "tools:cancel", 5)
	got("tools:cancel reply", m, err)
	r, err = p.Request(ctx, sent("tools:openSettings request", map[string]any{"type": "tools:openSettings", "id": 6}))
	got("tools:openSettings reply", r, err)
	examples["tools:chunk"] = captureChunk(t, h, spec, false)
	examples["tools:chunk binary head"] = captureChunk(t, h, spec, true)
	examples["tools:chunk stream head"], examples["tools:chunk stream end"] = captureStream(t, h, spec)
	r, err = p.Request(ctx, sent("tools:disconnect request", map[string]any{"type": "tools:disconnect", "id": 8, "server": "lab-tools"}))
	got("tools:disconnect reply", r, err)
	connect(t, ctx, p, 9, spec)
	p.Send(map[string]any{"type": "tools:call", "id": 10, "server": "lab-tools", "tool": "crash", "arguments": map[string]any{}})
	m, err = p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:closed" })
	if err != nil {
		for _, m := range p.All() {
			t.Logf("got %.300s", m)
		}
	}
	got("tools:closed", m, err)

	// tools:closing: the page sends a binary frame.
	p2 := h.page(ctx)
	p2.Conn.WriteMessage(websocket.BinaryMessage, []byte{0})
	m, err = p2.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:closing" })
	got("tools:closing", m, err)

	// A page session: hello, a sequenced reply, an acknowledgement, a
	// drop and the resume, and a resume refused.
	p3 := h.page(ctx)
	r, err = p3.Request(ctx, sent("tools:hello request", map[string]any{"type": "tools:hello", "id": "h1", "features": []string{"resume"}}))
	got("tools:hello reply", r, err)
	var session struct{ Token string }
	json.Unmarshal(r.Fields["session"], &session)
	connect(t, ctx, p3, 1, spec)
	r, err = p3.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": "lab-tools", "tool": "slow", "arguments": map[string]any{"steps": 1, "intervalMs": 10, "tag": "seq"}})
	got("sequenced tools:call reply", r, err)
	var seq uint64
	json.Unmarshal(r.Fields["n"], &seq)
	p3.Send(sent("tools:ack", map[string]any{"type": "tools:ack", "n": seq}))
	p3.Send(map[string]any{"type": "tools:call", "id": 3, "server": "lab-tools", "tool": "slow", "arguments": map[string]any{"steps": 3, "intervalMs": 100, "tag": "away"}})
	p3.Drop()
	time.Sleep(50 * time.Millisecond)
	p4 := h.page(ctx)
	r, err = p4.Request(ctx, sent("tools:hello resume request", map[string]any{"type": "tools:hello", "id": "h2", "features": []string{"resume"}, "resume": map[string]any{"token": session.Token, "n": seq}}))
	got("tools:hello resumed reply", r, err)
	if _, err := p4.Reply(ctx, "tools:call", 3); err != nil {
		t.Fatal(err)
	}
	p5 := h.page(ctx)
	r, err = p5.Request(ctx, map[string]any{"type": "tools:hello", "id": "h3", "features": []string{"resume"}, "resume": map[string]any{"token": "ps_expired", "n": 7}})
	got("tools:hello refused reply", r, err)

	doc, err := os.ReadFile("PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		doc = rewriteExamples(t, doc, examples)
		if err := os.WriteFile("PROTOCOL.md", doc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	documented := parseExamples(t, doc)
	var labels []string
	for l := range examples {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	for _, label := range labels {
		want, ok := documented[label]
		if !ok {
			t.Errorf("PROTOCOL.md has no example %q (run go test ./bridge -run TestProtocolDocument -update)", label)
			continue
		}
		if a, b := shape(t, examples[label]), shape(t, want); a != b {
			t.Errorf("example %q is out of step with the bridge:\n  bridge sends: %s\n  document:     %s", label, a, b)
		}
	}
	for _, code := range bridge.ErrorCodes {
		if !bytes.Contains(doc, []byte("| `"+code+"` |")) {
			t.Errorf("error code %q is not in PROTOCOL.md's table", code)
		}
	}
	for _, code := range bridge.CloseCodes {
		if !bytes.Contains(doc, []byte("| "+strconv.Itoa(code)+" |")) {
			t.Errorf("close code %d is not in PROTOCOL.md's table", code)
		}
	}
}

// captureChunk returns one raw tools:chunk frame of a reply larger than the
// frame limit, read from a socket of its own.
func captureChunk(t *testing.T, h *harness, spec bridge.ServerSpec, binary bool) []byte {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.Dial(h.wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if binary {
		conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"tools:hello","id":0,"features":["binary"]}`))
	}
	connectMsg, _ := json.Marshal(map[string]any{"type": "tools:connect", "id": 1, "server": spec.Name, "fingerprint": spec.Fingerprint, "confirmed": true})
	conn.WriteMessage(websocket.TextMessage, connectMsg)
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte(`"type":"tools:connect"`)) {
			break
		}
	}
	conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"tools:call","id":2,"server":"`+spec.Name+`","tool":"big","arguments":{"bytes":6000}}`))
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte(`"type":"tools:chunk"`)) {
			return data
		}
	}
}

// captureStream returns the head and the end of a streamed result.
func captureStream(t *testing.T, h *harness, spec bridge.ServerSpec) (head, end []byte) {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.Dial(h.wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"tools:hello","id":0,"features":["binary","stream"]}`))
	connectMsg, _ := json.Marshal(map[string]any{"type": "tools:connect", "id": 1, "server": spec.Name, "fingerprint": spec.Fingerprint, "confirmed": true})
	conn.WriteMessage(websocket.TextMessage, connectMsg)
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte(`"type":"tools:connect"`)) {
			break
		}
	}
	conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"tools:call","id":2,"server":"`+spec.Name+`","tool":"big","arguments":{"bytes":200000}}`))
	for end == nil {
		typ, data, err := conn.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case typ != websocket.TextMessage || !bytes.Contains(data, []byte(`"type":"tools:chunk"`)):
		case bytes.Contains(data, []byte(`"stream":true`)):
			head = data
		case bytes.Contains(data, []byte(`"end":true`)):
			end = data
		}
	}
	if head == nil {
		t.Fatal("a stream's end without its head")
	}
	return head, end
}

var exampleRE = regexp.MustCompile("(?m)^EXAMPLE (.+)$|^<!-- example: (.+) -->\n```json\n((?s:.*?))```\n")

func parseExamples(t *testing.T, doc []byte) map[string][]byte {
	out := map[string][]byte{}
	for _, m := range exampleRE.FindAllSubmatch(doc, -1) {
		if len(m[2]) > 0 {
			out[string(m[2])] = m[3]
		}
	}
	return out
}

func rewriteExamples(t *testing.T, doc []byte, examples map[string][]byte) []byte {
	return exampleRE.ReplaceAllFunc(doc, func(match []byte) []byte {
		sm := exampleRE.FindSubmatch(match)
		label := string(sm[1]) + string(sm[2])
		ex, ok := examples[label]
		if !ok {
			return match
		}
		text := readable(t, ex)
		// The test's tool server is this test binary; show it as the
		// installed program it stands for.
		if exe, err := os.Executable(); err == nil {
			text = strings.ReplaceAll(text, exe, "/opt/lab-tools/bin/lab-tools")
		}
		text = strings.ReplaceAll(text, "'-test.run=^$'", "--stdio")
		text = strings.ReplaceAll(text, "-test.run=^$", "--stdio")
		return []byte(fmt.Sprintf("<!-- example: %s -->\n```json\n%s\n```\n", label, text))
	})
}

// readable indents an example and shortens what would drown the reader:
// long arrays keep their first items, long strings their start.
func readable(t *testing.T, raw []byte) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("example is not JSON: %v", err)
	}
	var shorten func(v any, depth int) any
	shorten = func(v any, depth int) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = shorten(e, depth+1)
			}
		case []any:
			keep := 2
			if depth > 2 {
				keep = 1
			}
			if len(x) > keep+1 {
				x = x[:keep]
			}
			for i := range x {
				x[i] = shorten(x[i], depth+1)
			}
			return x
		case string:
			if len(x) > 160 {
				return x[:120] + "…"
			}
		}
		return v
	}
	v = shorten(v, 0)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	enc.Encode(v)
	return strings.TrimSpace(buf.String())
}

// shape is the sorted field list of a message and of its error object.
func shape(t *testing.T, raw []byte) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not a JSON object: %s", raw)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := strings.Join(keys, ",")
	if e, ok := m["error"]; ok {
		var em map[string]json.RawMessage
		json.Unmarshal(e, &em)
		ek := make([]string, 0, len(em))
		for k := range em {
			ek = append(ek, k)
		}
		sort.Strings(ek)
		s += " error{" + strings.Join(ek, ",") + "}"
	}
	var typ string
	json.Unmarshal(m["type"], &typ)
	return typ + " {" + s + "}"
}
