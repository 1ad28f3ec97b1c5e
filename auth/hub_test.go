package auth

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
)

// hubConfig is a JupyterHub 5 configuration: jupytertest.HubTestConfig
// (the scopes and roles of etc/jupyterhub/, a viewer role for vera on
// alice's server, a service token), with the single-user servers reading
// singleuser_config.py.
const hubConfig = jupytertest.HubTestConfig + `
c.Spawner.args = ["--allow-root", "--config=" + d + "/singleuser_config.py"]
c.Spawner.environment = {"JUPYTERHUB_SINGLEUSER_EXTENSION": "1"}
`

// startHub starts a Hub with config (see jupytertest.HubSpec) and the
// single-user example etc/jupyterhub/jupyter_server_config.py (the granular
// authorizer) as singleuser_config.py in its directory.
func startHub(t *testing.T, root, config string) *jupytertest.Hub {
	t.Helper()
	return jupytertest.StartHub(t, jupytertest.HubSpec{Root: root, Config: config,
		Files: map[string]string{"singleuser_config.py": jupytertest.HubExample(t, "jupyter_server_config.py")}})
}

func TestHub5Verdicts(t *testing.T) {
	root := trixieRoot(t)
	h := startHub(t, root, hubConfig)
	target := h.StartServer(t, "alice")
	env := map[string]string{
		"JUPYTERHUB_SERVICE_URL":    strings.TrimSuffix(target, "/") + "/user/alice/",
		"JUPYTERHUB_SERVICE_PREFIX": "/user/alice/",
		"JUPYTERHUB_USER":           "alice",
		"JUPYTER_RUNTIME_DIR":       t.TempDir(),
	}
	parent, err := jupyter.FindParent(jupyter.ParentOptions{Getenv: func(k string) string { return env[k] }, PPID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !parent.Hub || parent.Owner != "alice" || parent.Source != "JUPYTERHUB_SERVICE_URL" {
		t.Fatalf("parent %+v", parent)
	}
	if v, err := parent.Version(context.Background()); err != nil || jupyter.MajorVersion(v) != 2 {
		t.Fatalf("single-user server version %q, %v", v, err)
	}
	js := &jupyterServer{HostHdr: h.HostHdr, Parent: parent, Token: h.APIToken}
	tp := newTopology(t, js, JupyterOptions{})

	aliceCookie := h.BrowserCookie(t, "alice")
	aliceAll := h.Token(t, "alice", nil)
	aliceAccessOnly := h.Token(t, "alice", []string{"access:servers!user=alice"})
	aliceNoAccess := h.Token(t, "alice", []string{"read:users!user=alice"})
	bob := h.Token(t, "bob", nil)
	vera := h.Token(t, "vera", nil)
	tp.logs.secret(aliceCookie, aliceAll, aliceAccessOnly, aliceNoAccess, bob, vera)
	same := "http://" + h.HostHdr
	tp.run(t, []verdictCase{
		{name: "owner's browser cookie", via: "proxy", header: hdr("Cookie", aliceCookie, "Origin", same), admitUser: "alice"},
		{name: "owner's token", via: "proxy", header: hdr("Authorization", "token "+aliceAll), admitUser: "alice"},
		{name: "owner's token as ?token=", via: "proxy", query: "?token=" + aliceAll, admitUser: "alice"},
		{name: "owner's token with access but without the execute scope", via: "proxy", header: hdr("Authorization", "Bearer "+aliceAccessOnly), code: 4403, reason: "may not execute kernels"},
		{name: "owner's token without access to servers", via: "direct", host: h.HostHdr, header: hdr("Authorization", "token "+aliceNoAccess), code: 4401, reason: "did not accept"},
		{name: "another user", via: "proxy", header: hdr("Authorization", "token "+bob), code: 4401, reason: "did not accept"},
		{name: "viewer with read-only access to the server", via: "proxy", header: hdr("Authorization", "token "+vera), code: 4403, reason: `"vera" may not execute kernels`},
		{name: "owner's cookie with a foreign Origin", via: "direct", host: h.HostHdr, header: hdr("Cookie", aliceCookie, "Origin", "http://evil.example"), status: 403},
		{name: "no credentials", via: "proxy", code: 4401, reason: "no Jupyter credentials"},
	})
}

// hub3Config is a JupyterHub 3.0 configuration (Debian 12): dummy
// authenticator, servers run as the Hub's user with jupyter_server 1.x.
const hub3Config = `
c = get_config()
d = %[1]q
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = %[2]d
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = %[3]d
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:%[4]d"
c.ConfigurableHTTPProxy.auth_token = %[5]q
c.ConfigurableHTTPProxy.pid_file = d + "/proxy.pid"
c.JupyterHub.db_url = "sqlite:///" + d + "/hub.sqlite"
c.JupyterHub.cookie_secret_file = d + "/cookie_secret"
c.JupyterHub.pid_file = d + "/hub.pid"
c.JupyterHub.authenticator_class = "dummy"
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = d + "/home/{username}"
c.ConfigurableHTTPProxy.command = [%[7]q]
c.Spawner.args = ["--allow-root"]
c.Spawner.environment = {"JUPYTERHUB_SINGLEUSER_APP": "jupyter_server.serverapp.ServerApp"}
c.Spawner.http_timeout = 60
c.JupyterHub.services = [{"name": "tester", "api_token": %[6]q}]
c.JupyterHub.load_roles = [
    {"name": "tester", "services": ["tester"], "scopes": ["admin:users", "admin:servers", "tokens", "list:users", "read:users"]},
]
`

// TestHub3CookieThroughTheChain: browser → configurable-http-proxy →
// (jupyter-server-proxy emulation under /user/alice/megane/) → bridge, which
// asks alice's jupyter_server 1.x single-user server.
func TestHub3CookieThroughTheChain(t *testing.T) {
	if _, err := exec.LookPath("jupyterhub"); err != nil {
		needComponent(t, "jupyterhub (Debian 12)", err)
	}
	if _, err := exec.Command(jupytertest.CHPBinary(), "--version").Output(); err != nil {
		needComponent(t, "configurable-http-proxy from npm (.ci/hub-chp.sh)", err)
	}
	h := startHub(t, "", hub3Config)
	target := h.StartServer(t, "alice")
	env := map[string]string{
		"JUPYTERHUB_SERVICE_URL":    strings.TrimSuffix(target, "/") + "/user/alice/",
		"JUPYTERHUB_SERVICE_PREFIX": "/user/alice/",
		"JUPYTERHUB_USER":           "alice",
		"JUPYTER_RUNTIME_DIR":       t.TempDir(),
	}
	parent, err := jupyter.FindParent(jupyter.ParentOptions{Getenv: func(k string) string { return env[k] }, PPID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := parent.Version(context.Background()); err != nil || jupyter.MajorVersion(v) != 1 {
		t.Fatalf("single-user server version %q, %v", v, err)
	}
	logs := newLogCapture(t)
	gate := NewJupyterGate(parent, JupyterOptions{Logger: logs.Logger})
	b := newBridgeServer(t, gate, logs.Logger)
	p := newServerProxyAt(t, b.URL, "/user/alice/megane/")
	h.AddRoute(t, "/user/alice/megane", p.URL)

	aliceCookie := h.BrowserCookie(t, "alice")
	bob := h.Token(t, "bob", nil)
	logs.secret(aliceCookie, bob, h.APIToken)
	ws := wsURL(strings.TrimSuffix(h.Public, "/"), "/user/alice/megane/builder-tools/ws")
	same := "http://" + h.HostHdr
	cases := []verdictCase{
		{name: "owner's browser cookie through configurable-http-proxy", via: "proxy", header: hdr("Cookie", aliceCookie, "Origin", same), admitUser: "alice"},
		{name: "another user's token", via: "proxy", header: hdr("Authorization", "token "+bob), code: 4401, reason: "did not accept"},
		{name: "no credentials", via: "proxy", code: 4401, reason: "no Jupyter credentials"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkSeen(t, tc, dial(t, ws, "", tc.header))
		})
	}
}
