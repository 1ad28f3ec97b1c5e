package bridge_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// TestArgumentsByteForByte: a call's arguments reach the server as the page
// wrote them less the whitespace between tokens (PROTOCOL.md, tools:call):
// key order, duplicate keys, number spelling, escapes and characters an
// HTML-safe encoder would rewrite are kept, over stdio and over Streamable
// HTTP. The echo tool returns the arguments it received verbatim inside its
// result, which the bridge relays raw.
func TestArgumentsByteForByte(t *testing.T) {
	const args = "{ \"z\" : [1, 2.50, 1e3, -0.0],\n\t\"a\":\"<&> \\u00e9 é \\/ \\u2028\",  \"n\" : { } ,\"t\":true, \"t\" : false, \"r\": \"\u2028\" }"
	// What the server must receive: the same bytes without the whitespace
	// between tokens, which stdio's one-line framing cannot carry.
	const want = "{\"z\":[1,2.50,1e3,-0.0],\"a\":\"<&> \\u00e9 é \\/ \\u2028\",\"n\":{},\"t\":true,\"t\":false,\"r\":\"\u2028\"}"
	replay, err := bridgetest.NewHTTPReplay(bridgetest.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(replay)
	t.Cleanup(srv.Close)
	httpSpec := bridge.ServerSpec{Name: "echo-http", Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp", Source: "test", Fingerprint: "sha256:http"}
	stdioSpec := fakeServer(t, "echo-stdio", bridgetest.Mode{})
	for _, spec := range []bridge.ServerSpec{stdioSpec, httpSpec} {
		t.Run(spec.Transport, func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			h := newHarness(t, bridge.Options{}, spec)
			p := h.page(ctx)
			connect(t, ctx, p, 1, spec)
			frame := `{"type":"tools:call","id":2,"server":"` + spec.Name + `","tool":"echo","arguments":` + args + `}`
			if err := p.SendText([]byte(frame)); err != nil {
				t.Fatal(err)
			}
			r, err := p.Reply(ctx, "tools:call", 2)
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, r)
			var res struct {
				StructuredContent struct {
					Echo json.RawMessage `json:"echo"`
				} `json:"structuredContent"`
			}
			if err := json.Unmarshal(r.Fields["result"], &res); err != nil {
				t.Fatal(err)
			}
			// Go 1.27's JSON encoder (under go-sdk) writes U+2028 in a
			// string as \u2028, the same JSON value; Go 1.26's kept it raw.
			// PROTOCOL.md says so; nothing else may change.
			wantEscaped := strings.Replace(want, "\u2028", `\u2028`, 1)
			if got := res.StructuredContent.Echo; !bytes.Equal(got, []byte(want)) && !bytes.Equal(got, []byte(wantEscaped)) {
				t.Fatalf("the server received other bytes than the page sent:\n sent: %q\n got:  %q\n want: %q\n   or: %q", args, got, want, wantEscaped)
			}
		})
	}
}
