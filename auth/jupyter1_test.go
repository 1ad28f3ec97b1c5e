package auth

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// verdictCase is one connection attempt and what the page must see.
type verdictCase struct {
	name   string
	via    string // "proxy" (through the jupyter-server-proxy emulation) or "direct"
	host   string // Host header; "" = the Jupyter server's (what a browser sends through the proxy)
	query  string
	header http.Header
	// Expectations: exactly one of admitUser, status, code.
	admitUser string
	status    int
	code      int
	reason    string // substring of the refusal reason
}

// topology is a parent server with the bridge and the proxy in front.
type topology struct {
	js     *jupyterServer
	gate   *JupyterGate
	bridge string // http URL of the bridge
	proxy  string // http URL of the proxy emulation
	logs   *logCapture
}

func newTopology(t *testing.T, js *jupyterServer, opts JupyterOptions) *topology {
	logs := newLogCapture(t)
	logs.secret(js.Token)
	opts.Logger = logs.Logger
	g := NewJupyterGate(js.Parent, opts)
	b := newBridgeServer(t, g, logs.Logger)
	p := newServerProxy(t, b.URL)
	return &topology{js: js, gate: g, bridge: b.URL, proxy: p.URL, logs: logs}
}

func (tp *topology) run(t *testing.T, cases []verdictCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp.logs.secret(tc.header.Values("Cookie")...)
			for _, a := range tc.header.Values("Authorization") {
				_, v, _ := strings.Cut(a, " ")
				tp.logs.secret(v)
			}
			tp.logs.secret(strings.TrimPrefix(tc.query, "?token="))
			host := tc.host
			if host == "" {
				host = tp.js.HostHdr
			}
			var u string
			switch tc.via {
			case "proxy":
				u = wsURL(tp.proxy, "/megane/builder-tools/ws"+tc.query)
			case "direct":
				u = wsURL(tp.bridge, "/builder-tools/ws"+tc.query)
			default:
				t.Fatalf("via %q", tc.via)
			}
			got := dial(t, u, host, tc.header)
			checkSeen(t, tc, got)
		})
	}
}

// checkSeen asserts the verdict a page observed. Through the proxy, a
// refusal's code and reason arrive in the tools:closing message (the close
// frame's code does not survive jupyter-server-proxy: the page sees 1005);
// directly they arrive in both.
func checkSeen(t *testing.T, tc verdictCase, got seen) {
	t.Helper()
	switch {
	case tc.admitUser != "":
		if got.User != tc.admitUser || got.Closing != nil || got.CloseCode != 1000 && got.CloseCode != 1005 {
			t.Fatalf("want admitted as %q, saw %s", tc.admitUser, got)
		}
	case tc.status != 0:
		if tc.via == "proxy" {
			// The proxy has already answered 101: an HTTP refusal is a drop.
			if got.HTTPStatus != 0 || got.CloseCode != 1006 || got.Closing != nil || got.User != "" {
				t.Fatalf("want a bare drop (1006) through the proxy, saw %s", got)
			}
			return
		}
		if got.HTTPStatus != tc.status {
			t.Fatalf("want HTTP %d, saw %s", tc.status, got)
		}
	default:
		if got.User != "" || got.Closing == nil || got.Closing.Code != tc.code || !strings.Contains(got.Closing.Reason, tc.reason) {
			t.Fatalf("want refusal %d ~%q, saw %s", tc.code, tc.reason, got)
		}
		wantClose := tc.code
		if tc.via == "proxy" {
			wantClose = 1005
		}
		if got.CloseCode != wantClose {
			t.Fatalf("want close code %d, saw %s", wantClose, got)
		}
	}
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// readOnlyAuthorizer denies kernel execution and every write (jupyter_server
// ≥ 1.15 Authorizer API).
const readOnlyAuthorizer = `
from jupyter_server.auth import Authorizer

class ReadOnly(Authorizer):
    def is_authorized(self, handler, user, action, resource):
        return action == "read"
`

func TestJupyter1Verdicts(t *testing.T) {
	js := startJupyter(t, jupyterSpec{})
	if v, _ := js.Parent.Version(context.Background()); jupyter.MajorVersion(v) != 1 {
		t.Fatalf("want jupyter_server 1.x on the host, got %s", v)
	}
	tp := newTopology(t, js, JupyterOptions{})
	cookie := js.loginCookie(t)
	owner := jupyter.OSUser()
	same := "http://" + js.HostHdr
	foreign := "http://evil.example"
	bridgeHost := strings.TrimPrefix(tp.bridge, "http://")
	tp.run(t, []verdictCase{
		{name: "token header", via: "proxy", header: hdr("Authorization", "token "+js.Token, "Origin", same), admitUser: owner},
		{name: "query token", via: "proxy", query: "?token=" + js.Token, header: hdr("Origin", same), admitUser: owner},
		{name: "login cookie", via: "proxy", header: hdr("Cookie", cookie, "Origin", same), admitUser: owner},
		{name: "login cookie without Origin", via: "proxy", header: hdr("Cookie", cookie), admitUser: owner},
		{name: "wrong token", via: "direct", host: js.HostHdr, header: hdr("Authorization", "token wrong-"+js.Token[:8]), code: 4401, reason: "did not accept"},
		{name: "wrong token through the proxy", via: "proxy", query: "?token=nope-nope-nope", code: 4401, reason: "did not accept"},
		{name: "bearer scheme (1.x accepts only token)", via: "direct", host: js.HostHdr, header: hdr("Authorization", "Bearer "+js.Token), code: 4401, reason: "did not accept"},
		{name: "no credentials", via: "direct", host: js.HostHdr, code: 4401, reason: "no Jupyter credentials"},
		{name: "forged cookie", via: "direct", host: js.HostHdr, header: hdr("Cookie", "username-127-0-0-1-"+strings.Split(js.HostHdr, ":")[1]+"=2|1:0|10:1|forged"), code: 4401, reason: "did not accept"},
		{name: "cookie with a foreign Origin", via: "direct", host: js.HostHdr, header: hdr("Cookie", cookie, "Origin", foreign), status: 403},
		{name: "cookie with a foreign Origin through the proxy", via: "proxy", header: hdr("Cookie", cookie, "Origin", foreign), status: 403},
		{name: "token with a foreign Origin", via: "direct", host: js.HostHdr, header: hdr("Authorization", "token "+js.Token, "Origin", foreign), admitUser: owner},
		{name: "straight to the bridge port with the token", via: "direct", header: hdr("Authorization", "token "+js.Token), admitUser: owner},
		{name: "straight to the bridge port with the cookie, same-origin page", via: "direct", host: bridgeHost, header: hdr("Cookie", cookie, "Origin", "http://"+bridgeHost), code: 4401, reason: "did not accept"},
		{name: "straight to the bridge port with the cookie, Jupyter's page", via: "direct", host: bridgeHost, header: hdr("Cookie", cookie, "Origin", same), status: 403},
		{name: "DNS rebinding: Host and Origin of an attacker's name", via: "direct", host: "evil.example:" + strings.Split(bridgeHost, ":")[1], header: hdr("Origin", "http://evil.example:"+strings.Split(bridgeHost, ":")[1]), code: 4401, reason: "no Jupyter credentials"},
	})
	tp.logs.secret(cookie)

	t.Run("Jupyter's own Origin verdict when the bridge is told any Origin is fine", func(t *testing.T) {
		// Defence in depth the other way round: a bridge configured with
		// allow_origin "*" while Jupyter is not still gets Jupyter's refusal.
		loose := newTopology(t, js, JupyterOptions{AllowOrigin: "*"})
		loose.logs.secret(cookie)
		loose.run(t, []verdictCase{
			{name: "cookie with a foreign Origin", via: "direct", host: js.HostHdr, header: hdr("Cookie", cookie, "Origin", foreign), status: 403},
		})
	})

	t.Run("recheck", func(t *testing.T) {
		r, _ := http.NewRequest("GET", "/builder-tools/ws", nil)
		r.Host = js.HostHdr
		r.Header.Set("Cookie", cookie)
		adm, ref := tp.gate.Admit(context.Background(), r)
		if ref != nil {
			t.Fatalf("refused: %+v", ref)
		}
		if ref := adm.Recheck(context.Background()); ref != nil {
			t.Fatalf("recheck while allowed: %+v", ref)
		}
		// Stopped, Jupyter removes its runtime file: the bridge knows its
		// parent is gone without asking its address.
		js.Stop()
		ref = adm.Recheck(context.Background())
		if ref == nil || ref.CloseCode != 4503 || !strings.Contains(ref.Reason, "has stopped") {
			t.Fatalf("recheck with the server gone: %+v", ref)
		}
		// A fresh connection is refused too: errors are never cached and the
		// admission's cache entry does not outlive the parent's answer.
		tp.run(t, []verdictCase{
			{name: "parent gone", via: "direct", host: js.HostHdr, header: hdr("Authorization", "token other-"+js.Token[:6]), code: 4503, reason: "has stopped"},
			{name: "parent gone through the proxy", via: "proxy", header: hdr("Authorization", "token other2-"+js.Token[:6]), code: 4503, reason: "has stopped"},
			{name: "parent gone, with the credentials admitted before", via: "direct", host: js.HostHdr, header: hdr("Cookie", cookie), code: 4503, reason: "has stopped"},
		})
	})
}

func TestJupyter1AllowOrigin(t *testing.T) {
	js := startJupyter(t, jupyterSpec{Args: []string{"--ServerApp.allow_origin=http://app.example"}})
	cookie := js.loginCookie(t)
	owner := jupyter.OSUser()
	told := newTopology(t, js, JupyterOptions{AllowOrigin: "http://app.example"})
	told.logs.secret(cookie)
	told.run(t, []verdictCase{
		{name: "allowed Origin with the cookie", via: "proxy", header: hdr("Cookie", cookie, "Origin", "http://app.example"), admitUser: owner},
		{name: "another Origin with the cookie", via: "direct", host: js.HostHdr, header: hdr("Cookie", cookie, "Origin", "http://other.example"), status: 403},
	})
	untold := newTopology(t, js, JupyterOptions{})
	untold.logs.secret(cookie)
	untold.run(t, []verdictCase{
		{name: "allowed by Jupyter but the bridge was not told", via: "direct", host: js.HostHdr, header: hdr("Cookie", cookie, "Origin", "http://app.example"), status: 403},
	})
}

func TestJupyter1ReadOnlyAuthorizer(t *testing.T) {
	js := startJupyter(t, jupyterSpec{
		Files:    map[string]string{"readonly_authz.py": readOnlyAuthorizer},
		ConfigPy: "c.ServerApp.authorizer_class = 'readonly_authz.ReadOnly'\n",
	})
	cookie := js.loginCookie(t)
	tp := newTopology(t, js, JupyterOptions{})
	tp.logs.secret(cookie)
	tp.run(t, []verdictCase{
		{name: "token user who may not execute kernels", via: "direct", host: js.HostHdr, header: hdr("Authorization", "token "+js.Token), code: 4403, reason: "may not execute kernels"},
		{name: "cookie user who may not execute kernels, through the proxy", via: "proxy", header: hdr("Cookie", cookie, "Origin", "http://"+js.HostHdr), code: 4403, reason: "may not execute kernels"},
		{name: "no credentials", via: "direct", host: js.HostHdr, code: 4401, reason: "no Jupyter credentials"},
	})
}
