package bridge_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// TestHTTPServerWantsCredentials: a Streamable HTTP server that answers 401
// or 403 gets the person one line that says it wants credentials and that
// the entry's "headers" key carries them, at connect and for a call whose
// credentials were revoked mid-session; the secret appears neither on the
// page nor in the log (the server's 401 body echoes it, as some do).
func TestHTTPServerWantsCredentials(t *testing.T) {
	const secret = "s3cret-lab-token"
	replay, err := bridgetest.NewHTTPReplay(bridgetest.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var revoked atomic.Bool
	var status atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := int(status.Load())
		if r.Header.Get("Authorization") != "Bearer "+secret || revoked.Load() {
			code = http.StatusUnauthorized
		}
		if code != 0 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="lab", error="invalid_token"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			w.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"bad token ` + r.Header.Get("Authorization") + `"}}`))
			return
		}
		replay.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	spec := func(name string, headers map[string]string) bridge.ServerSpec {
		return bridge.ServerSpec{Name: name, Transport: bridge.TransportHTTP, URL: srv.URL + "/mcp", Headers: headers, Source: "test", Fingerprint: "sha256:" + name}
	}
	none := spec("no-headers", nil)
	wrong := spec("wrong-token", map[string]string{"Authorization": "Bearer wrong-" + secret})
	good := spec("good-token", map[string]string{"Authorization": "Bearer " + secret})
	ctx := testCtx(t, 30*time.Second)
	h := newHarness(t, bridge.Options{}, none, wrong, good)
	p := h.page(ctx)
	failedConnect := func(s bridge.ServerSpec) string {
		t.Helper()
		r, err := p.Request(ctx, map[string]any{"type": "tools:connect", "id": s.Name, "server": s.Name, "fingerprint": s.Fingerprint, "confirmed": true})
		if err != nil {
			t.Fatal(err)
		}
		mustErr(t, r, bridge.CodeServerFailed)
		return r.Error.Message
	}
	check := func(what, msg string, wants ...string) {
		t.Helper()
		for _, w := range wants {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q lacks %q", what, msg, w)
			}
		}
		if strings.Contains(msg, secret) {
			t.Errorf("%s: the secret reached the page: %q", what, msg)
		}
	}
	check("no headers", failedConnect(none), "no-headers answered 401 Unauthorized", `it wants credentials, which go in the "headers" key of its entry`, `"Authorization": "Bearer <token>"`)
	check("wrong token", failedConnect(wrong), "wrong-token answered 401 Unauthorized", `to the credentials in its entry's "headers" (Authorization)`, "renew them there", "it asks for Bearer")

	status.Store(http.StatusForbidden)
	check("forbidden", failedConnect(good), "good-token answered 403 Forbidden", `"headers" (Authorization)`, "lack the rights")
	status.Store(0)

	connect(t, ctx, p, "ok", good)
	revoked.Store(true)
	r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": "c", "server": good.Name, "tool": "echo", "arguments": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK == nil || *r.OK {
		t.Fatalf("a call with revoked credentials succeeded: %s", r)
	}
	check("revoked mid-session", r.Error.Message, "good-token answered 401 Unauthorized", `"headers" (Authorization)`)

	// The servers list shows the failure too, and nothing anywhere holds the secret.
	s, _ := p.Request(ctx, map[string]any{"type": "tools:servers", "id": "s"})
	if !strings.Contains(string(s.Raw), `wants credentials`) {
		t.Errorf("tools:servers does not say the server wants credentials: %s", s.Raw)
	}
	for _, m := range p.All() {
		if strings.Contains(string(m.Raw), secret) {
			t.Fatalf("the secret reached the page: %s", m.Raw)
		}
	}
	if strings.Contains(h.logBuf.String(), secret) {
		t.Fatalf("the secret reached the log:\n%s", h.logBuf.String())
	}
}
