package auth

import (
	"context"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
)

// trixieRoot is the Debian 13 chroot (jupytertest.Trixie).
func trixieRoot(t *testing.T) string { return jupytertest.Trixie(t) }

func TestJupyter2Verdicts(t *testing.T) {
	root := trixieRoot(t)
	js := startJupyter(t, jupyterSpec{Root: root})
	if v, _ := js.Parent.Version(context.Background()); jupyter.MajorVersion(v) != 2 {
		t.Fatalf("want jupyter_server 2.x in the chroot, got %s", v)
	}
	tp := newTopology(t, js, JupyterOptions{})
	cookie := js.loginCookie(t)
	tp.logs.secret(cookie)
	owner := jupyter.OSUser()
	same := "http://" + js.HostHdr
	tp.run(t, []verdictCase{
		{name: "token header", via: "proxy", header: hdr("Authorization", "token "+js.Token, "Origin", same), admitUser: owner},
		{name: "bearer header (2.x accepts it)", via: "direct", host: js.HostHdr, header: hdr("Authorization", "Bearer "+js.Token), admitUser: owner},
		{name: "query token", via: "proxy", query: "?token=" + js.Token, header: hdr("Origin", same), admitUser: owner},
		{name: "login cookie", via: "proxy", header: hdr("Cookie", cookie, "Origin", same), admitUser: owner},
		{name: "wrong token", via: "proxy", header: hdr("Authorization", "token nope-"+js.Token[:6]), code: 4401, reason: "did not accept"},
		{name: "no credentials", via: "direct", host: js.HostHdr, code: 4401, reason: "no Jupyter credentials"},
		{name: "cookie with a foreign Origin", via: "direct", host: js.HostHdr, header: hdr("Cookie", cookie, "Origin", "http://evil.example"), status: 403},
		{name: "token with a foreign Origin", via: "direct", host: js.HostHdr, header: hdr("Authorization", "token "+js.Token, "Origin", "http://evil.example"), admitUser: owner},
	})
	t.Run("Jupyter's own Origin verdict", func(t *testing.T) {
		loose := newTopology(t, js, JupyterOptions{AllowOrigin: "*"})
		loose.logs.secret(cookie)
		loose.run(t, []verdictCase{
			{name: "cookie with a foreign Origin", via: "direct", host: js.HostHdr, header: hdr("Cookie", cookie, "Origin", "http://evil.example"), status: 403},
		})
	})
}

func TestJupyter2ReadOnlyAuthorizer(t *testing.T) {
	root := trixieRoot(t)
	js := startJupyter(t, jupyterSpec{
		Root:     root,
		Files:    map[string]string{"readonly_authz.py": readOnlyAuthorizer},
		ConfigPy: "c.ServerApp.authorizer_class = 'readonly_authz.ReadOnly'\n",
	})
	cookie := js.loginCookie(t)
	tp := newTopology(t, js, JupyterOptions{})
	tp.logs.secret(cookie)
	tp.run(t, []verdictCase{
		{name: "token user who may not execute kernels", via: "proxy", header: hdr("Authorization", "token "+js.Token), code: 4403, reason: "may not execute kernels"},
		{name: "cookie user who may not execute kernels", via: "direct", host: js.HostHdr, header: hdr("Cookie", cookie), code: 4403, reason: "may not execute kernels"},
	})
	_ = strings.TrimSpace
}
