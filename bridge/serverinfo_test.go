package bridge_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// TestServerDescribesItself: what a server says about itself in initialize
// (serverInfo with title, websiteUrl, icons and fields the bridge does not
// know, and instructions) reaches the page in the tools:connect reply as the
// server sent it, over stdio and Streamable HTTP. An icon go-sdk cannot
// decode (sizes not a list) does not cost the session: the page decides
// what to render (contract §9: data: URIs only).
func TestServerDescribesItself(t *testing.T) {
	info := []byte(`{
  "name": "lab-tools",
  "title": "Lab tools <&>",
  "version": "2.1.0",
  "websiteUrl": "https://tools.example.org/docs",
  "icons": [
    {"src": "data:image/png;base64,iVBORw0KGgo=", "mimeType": "image/png", "sizes": ["16x16"]},
    {"src": "https://tools.example.org/icon.svg", "sizes": 48}
  ],
  "description": "Builds boxes.",
  "x-extra": {"kept": true}
}`)
	const instructions = "Call \"box\" first.\nUnits are nm <not Å>."
	replay, err := bridgetest.NewHTTPReplay(bridgetest.HTTPOptions{ServerInfo: info, Instructions: instructions})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(replay)
	t.Cleanup(srv.Close)
	httpSpec := bridge.ServerSpec{Name: "self-http", Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp", Source: "test", Fingerprint: "sha256:http"}
	stdioSpec := fakeServer(t, "self-stdio", bridgetest.Mode{ServerInfo: info, Instructions: instructions})
	wantInstr, _ := json.Marshal(instructions)
	// The stdio server writes serverInfo through encoding/json: compacted,
	// <>& escaped. The HTTP replay writes the bytes above as they are.
	stdioInfo, _ := json.Marshal(json.RawMessage(info))
	for _, tc := range []struct {
		spec bridge.ServerSpec
		info []byte
	}{{stdioSpec, stdioInfo}, {httpSpec, info}} {
		t.Run(tc.spec.Transport, func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			h := newHarness(t, bridge.Options{}, tc.spec)
			p := h.page(ctx)
			c := connect(t, ctx, p, 1, tc.spec)
			if !bytes.Equal(c.Fields["serverInfo"], tc.info) {
				t.Fatalf("serverInfo is not what the server sent:\n got: %s\nwant: %s", c.Fields["serverInfo"], tc.info)
			}
			var got string
			if err := json.Unmarshal(c.Fields["instructions"], &got); err != nil || got != instructions {
				t.Fatalf("instructions: %v %s, want %s", err, c.Fields["instructions"], wantInstr)
			}
			r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": tc.spec.Name, "tool": "echo", "arguments": map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, r)
		})
	}
	// A server that says nothing more: serverInfo as sent, no instructions.
	plain := fakeServer(t, "plain", bridgetest.Mode{})
	ctx := testCtx(t, 30*time.Second)
	h := newHarness(t, bridge.Options{}, plain)
	p := h.page(ctx)
	c := connect(t, ctx, p, 1, plain)
	if string(c.Fields["serverInfo"]) != `{"name":"plain","version":"1.0.0"}` || c.Fields["instructions"] != nil {
		t.Fatalf("a plain server's self-description: %s", c.Raw)
	}
}
