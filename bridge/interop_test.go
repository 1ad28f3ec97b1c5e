package bridge_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/child"
)

// interopCall is one tools/call of a reference server.
type interopCall struct {
	tool string
	args map[string]any
}

// TestReferenceServersByteExact runs npm's reference servers
// server-filesystem and server-memory over stdio through the bridge and
// checks that each result reaches the page byte for byte as the server
// wrote it: the same calls, made by a plain JSON-RPC client on a fresh copy
// of the server, give the bytes the page must get.
func TestReferenceServersByteExact(t *testing.T) {
	dir := t.TempDir()
	files := filepath.Join(dir, "files")
	if err := os.MkdirAll(filepath.Join(files, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(files, "a.txt"), []byte("hello <&> \u2028 world\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	entities := map[string]any{"entities": []any{
		map[string]any{"name": "water", "entityType": "molecule", "observations": []any{"H2O", "bent, 104.5°"}},
		map[string]any{"name": "argon", "entityType": "atom", "observations": []any{"noble gas"}},
	}}
	for _, tc := range []struct {
		name  string
		pkg   string
		args  func(memory string) []string
		env   func(memory string) []string
		calls []interopCall
	}{
		{name: "server-filesystem", pkg: "server-filesystem",
			args: func(string) []string { return []string{files} },
			env:  func(string) []string { return nil },
			calls: []interopCall{
				{"list_allowed_directories", map[string]any{}},
				{"list_directory", map[string]any{"path": files}},
				{"read_text_file", map[string]any{"path": filepath.Join(files, "a.txt")}},
				{"read_text_file", map[string]any{"path": "/etc/passwd"}}, // outside: a tool error
			}},
		{name: "server-memory", pkg: "server-memory",
			args: func(string) []string { return nil },
			env:  func(memory string) []string { return []string{"MEMORY_FILE_PATH=" + memory} },
			calls: []interopCall{
				{"create_entities", entities},
				{"read_graph", map[string]any{}},
				{"search_nodes", map[string]any{"query": "noble"}},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, js := npmServer(t, tc.pkg)
			direct := rawStdioCalls(t, node, append([]string{js}, tc.args(filepath.Join(dir, tc.name+"-direct.jsonl"))...),
				tc.env(filepath.Join(dir, tc.name+"-direct.jsonl")), tc.calls)

			memory := filepath.Join(dir, tc.name+"-bridge.jsonl")
			extra := map[string]string{}
			for _, kv := range tc.env(memory) {
				k, v, _ := bytes.Cut([]byte(kv), []byte("="))
				extra[string(k)] = string(v)
			}
			spec := bridge.ServerSpec{Name: tc.name, Transport: bridge.TransportStdio, Command: node,
				Args: append([]string{js}, tc.args(memory)...), Env: extra, Source: "test", Fingerprint: "sha256:" + tc.name}
			ctx := testCtx(t, 60*time.Second)
			h := newHarness(t, bridge.Options{}, spec)
			p := h.page(ctx)
			connect(t, ctx, p, 1, spec)
			for i, c := range tc.calls {
				r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 10 + i, "server": spec.Name, "tool": c.tool, "arguments": c.args})
				if err != nil {
					t.Fatalf("%s: %v", c.tool, err)
				}
				mustOK(t, r)
				if got := r.Fields["result"]; !bytes.Equal(got, direct[i]) {
					t.Errorf("%s: the page got\n%s\nthe server wrote\n%s", c.tool, got, direct[i])
				}
			}
		})
	}
}

// npmServer is node and the entry point of an npm reference server
// installed into .ci/node by .ci/run.
func npmServer(t testing.TB, pkg string) (node, js string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	js = filepath.Join(filepath.Dir(file), "..", ".ci", "node", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	node, err := exec.LookPath("node")
	if err != nil {
		needComponent(t, "node", "the machine's Node.js")
	}
	if _, err := os.Stat(js); err != nil {
		needComponent(t, "@modelcontextprotocol/"+pkg, "npm ci --prefix .ci/node")
	}
	return node, js
}

// rawStdioCalls starts a stdio server, initializes it as a plain JSON-RPC
// client (revision 2025-11-25, no capabilities) and returns the raw
// "result" of each call, as the server wrote it.
func rawStdioCalls(t *testing.T, node string, args, env []string, calls []interopCall) []json.RawMessage {
	t.Helper()
	cmd := exec.Command(node, args...)
	cmd.Env = append(os.Environ(), env...)
	child.InGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		child.KillGroup(cmd.Process)
		cmd.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	send := func(v any) {
		b, _ := json.Marshal(v)
		if _, err := stdin.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	await := func(id int) json.RawMessage {
		for sc.Scan() {
			var m struct {
				ID     *int            `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil || *m.ID != id {
				continue
			}
			if m.Error != nil {
				t.Fatalf("call %d: %s", id, m.Error)
			}
			return append(json.RawMessage(nil), m.Result...)
		}
		t.Fatalf("the server ended before answering %d: %v", id, sc.Err())
		return nil
	}
	send(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "direct", "version": "1"}}})
	await(0)
	send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	out := make([]json.RawMessage, len(calls))
	for i, c := range calls {
		send(map[string]any{"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": map[string]any{"name": c.tool, "arguments": c.args}})
		out[i] = await(i + 1)
	}
	return out
}
