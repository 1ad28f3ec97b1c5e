package bridge_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// fixturePath returns a megane-reference fixture from shared/ beside the
// checkout (CI lays it there too).
func fixturePath(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(bridgetest.FixtureDir(), name)
	if _, err := os.Stat(p); err != nil {
		needComponent(t, "the megane-reference fixture "+p, "shared/ beside the checkout")
	}
	return p
}

// fixtureParts returns the raw bytes of the fixture's tools array elements
// and of the call's result, exactly as in the files.
func fixtureParts(t *testing.T) (listFile, callFile string, tools []json.RawMessage, result json.RawMessage) {
	listFile = fixturePath(t, "tools-list.json")
	callFile = fixturePath(t, "call-polymer_chain.json")
	var list struct{ Tools []json.RawMessage }
	var call struct{ Result json.RawMessage }
	b, _ := os.ReadFile(listFile)
	if err := json.Unmarshal(b, &list); err != nil || len(list.Tools) == 0 {
		t.Fatalf("tools-list.json: %v", err)
	}
	b, _ = os.ReadFile(callFile)
	if err := json.Unmarshal(b, &call); err != nil || len(call.Result) == 0 {
		t.Fatalf("call-polymer_chain.json: %v", err)
	}
	return listFile, callFile, list.Tools, call.Result
}

func compact(t *testing.T, raw []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReferenceFixturesPassThrough: the page receives the reference
// server's tools/list and tools/call bytes unchanged, over stdio (where a
// message is one line, so the server sends them compacted) and over
// Streamable HTTP (where the replay sends the files' bytes as they are,
// indentation and all).
func TestReferenceFixturesPassThrough(t *testing.T) {
	listFile, callFile, tools, result := fixtureParts(t)
	replay, err := bridgetest.NewHTTPReplay(bridgetest.HTTPOptions{Name: "megane-builder-tools", Version: "0.1.0",
		FixtureList: listFile, FixtureCalls: map[string]string{"polymer_chain": callFile}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(replay)
	t.Cleanup(srv.Close)
	stdio := fakeServer(t, "megane-builder-tools", bridgetest.Mode{Version: "0.1.0", FixtureList: listFile,
		FixtureCalls: map[string]string{"polymer_chain": callFile}, PageSize: 1})
	httpSpec := bridge.ServerSpec{Name: "reference-http", Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp",
		Headers: map[string]string{"Authorization": "Bearer lab-token"}, Source: "test", Fingerprint: "sha256:http"}

	for _, tc := range []struct {
		spec    bridge.ServerSpec
		compact bool
	}{{stdio, true}, {httpSpec, false}} {
		t.Run(tc.spec.Transport, func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			h := newHarness(t, bridge.Options{}, tc.spec)
			p := h.page(ctx)
			c := connect(t, ctx, p, 1, tc.spec)
			var got []json.RawMessage
			if err := json.Unmarshal(c.Fields["tools"], &got); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tools) {
				t.Fatalf("got %d tools, the fixture has %d", len(got), len(tools))
			}
			for i := range tools {
				want := []byte(tools[i])
				if tc.compact {
					want = compact(t, want)
				}
				if !bytes.Equal(got[i], want) {
					t.Fatalf("tool %d differs from the fixture's bytes:\n got: %.200s\nwant: %.200s", i, got[i], want)
				}
			}
			var args map[string]any
			b, _ := os.ReadFile(callFile)
			var call struct{ Arguments map[string]any }
			json.Unmarshal(b, &call)
			args = call.Arguments
			r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": tc.spec.Name, "tool": "polymer_chain", "arguments": args})
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, r)
			want := []byte(result)
			if tc.compact {
				want = compact(t, want)
			}
			if !bytes.Equal(r.Fields["result"], want) {
				t.Fatalf("the call result differs from the fixture's bytes (%d vs %d bytes)", len(r.Fields["result"]), len(want))
			}
		})
	}
	// The entry's headers reached the HTTP server; nothing of the page's did.
	for _, req := range replay.Requests() {
		if req.Header.Get("Authorization") != "Bearer lab-token" {
			t.Fatalf("the entry's Authorization header did not reach the server: %v", req.Header)
		}
		if req.Header.Get("Cookie") != "" || req.Header.Get("Origin") != "" || strings.Contains(strings.ToLower(req.Header.Get("User-Agent")), "mozilla") {
			t.Fatalf("a page header reached the server: %v", req.Header)
		}
	}
}
