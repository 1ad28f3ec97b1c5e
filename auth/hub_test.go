package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// hubConfig is a JupyterHub 5 configuration: dummy authenticator, servers
// run as the Hub's own user, JupyterHub's custom jupyter_server scopes with
// an authorizer that honours them, a viewer role for vera on alice's server,
// and a service token for the test.
const hubConfig = `
c = get_config()
d = %[1]q
# The chroot's own configurable-http-proxy (Debian 13) is used, not %[7]q.
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
c.Authenticator.allow_all = True
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = d + "/home/{username}"
c.Spawner.args = ["--allow-root", "--config=" + d + "/singleuser_config.py"]
c.Spawner.environment = {"JUPYTERHUB_SINGLEUSER_EXTENSION": "1"}
c.Spawner.http_timeout = 60
c.JupyterHub.custom_scopes = {
    "custom:jupyter_server:read:*": {"description": "read a server"},
    "custom:jupyter_server:execute:*": {"description": "execute on a server", "subscopes": ["custom:jupyter_server:read:*"]},
}
c.Spawner.oauth_client_allowed_scopes = [
    "access:servers!server", "custom:jupyter_server:read:*!server", "custom:jupyter_server:execute:*!server",
]
c.JupyterHub.services = [{"name": "tester", "api_token": %[6]q}]
c.JupyterHub.load_roles = [
    {"name": "user", "scopes": ["self", "custom:jupyter_server:execute:*!user", "custom:jupyter_server:read:*!user"]},
    {"name": "viewer", "users": ["vera"], "scopes": ["access:servers!user=alice", "custom:jupyter_server:read:*!user=alice"]},
    {"name": "tester", "services": ["tester"], "scopes": ["admin:users", "admin:servers", "tokens", "list:users", "read:users"]},
]
`

// singleUserConfig makes the single-user server decide each action by the
// caller's custom:jupyter_server:<action>:<resource> scopes on this server.
const singleUserConfig = `
import os
from jupyterhub.singleuser.extension import JupyterHubAuthorizer

class ScopeAuthorizer(JupyterHubAuthorizer):
    def is_authorized(self, handler, user, action, resource):
        owner = os.environ["JUPYTERHUB_USER"]
        server = owner + "/" + os.environ.get("JUPYTERHUB_SERVER_NAME", "")
        wanted = set()
        for suffix in ("!user=" + owner, "!server=" + server):
            for res in (resource, "*"):
                wanted.add("custom:jupyter_server:%s:%s%s" % (action, res, suffix))
        return bool(self.hub_auth.check_scopes(wanted, user.hub_user))

c = get_config()
c.ServerApp.authorizer_class = ScopeAuthorizer
`

type hub struct {
	Public   string // http://127.0.0.1:<port>/
	HostHdr  string
	APIToken string // the tester service's token
	apiPort  int
	chpToken string
}

func startHub(t *testing.T, root, config string) *hub {
	t.Helper()
	tmpRoot := os.TempDir()
	if root != "" {
		tmpRoot = filepath.Join(root, "tmp")
	}
	dir, err := os.MkdirTemp(tmpRoot, "megane-hub-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	inner := strings.TrimPrefix(dir, root)
	port, hubPort, apiPort := freePort(t), freePort(t), freePort(t)
	svcToken, _ := NewToken()
	chpToken, _ := NewToken()
	conf := fmt.Sprintf(config, inner, port, hubPort, apiPort, chpToken, svcToken, chpBinary())
	if err := os.WriteFile(filepath.Join(dir, "jupyterhub_config.py"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "singleuser_config.py"), []byte(singleUserConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"/bin/sh", "-c", "cd " + inner + " && exec jupyterhub -f " + inner + "/jupyterhub_config.py"}
	if root != "" {
		args = append([]string{"chroot", root}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + inner, "LANG=C.UTF-8"}
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// The proxy and the servers inherit the Hub's stdout and stderr: if
	// they outlive it, Wait would wait for them. Wait this long, then
	// return.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		// On SIGTERM the Hub stops the single-user servers and the proxy
		// it started (cleanup_servers, cleanup_proxy). Those are not in its
		// process group: JupyterHub starts both with start_new_session, so
		// signalling the group does not reach them, and neither does
		// Pdeathsig if the Hub dies first.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		// Whatever the Hub left behind (it was killed, or did not finish)
		// still has its HOME under dir: the proxy inherits the Hub's, the
		// servers and their kernels have dir/home/<user>.
		if left := killUnder(inner); len(left) > 0 {
			t.Logf("killed processes the Hub left running: %v", left)
		}
		if t.Failed() {
			t.Logf("jupyterhub output:\n%s", out.String())
		}
	})
	h := &hub{Public: "http://127.0.0.1:" + strconv.Itoa(port) + "/", HostHdr: "127.0.0.1:" + strconv.Itoa(port),
		APIToken: svcToken, apiPort: apiPort, chpToken: chpToken}
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get(h.Public + "hub/api/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return h
			}
		}
		select {
		case <-done:
			t.Fatalf("jupyterhub exited:\n%s", out.String())
		case <-time.After(300 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("jupyterhub did not answer within 90 s:\n%s", out.String())
		}
	}
}

// api calls the Hub's REST API as the tester service.
func (h *hub) api(t *testing.T, method, path string, body any, into any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, h.Public+"hub/api/"+path, rd)
	req.Header.Set("Authorization", "token "+h.APIToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if into != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, into); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
	if resp.StatusCode >= 400 {
		t.Fatalf("%s %s: %s: %s", method, path, resp.Status, data)
	}
	return resp.StatusCode
}

// startServer starts user's default server and returns its internal URL
// (the proxy's route target) once it is ready.
func (h *hub) startServer(t *testing.T, user string) string {
	t.Helper()
	h.spawn(t, user)
	return h.route(t, user)
}

// spawn creates the users user, bob and vera, starts user's default
// server, waits until the Hub says it is ready, and returns its process id
// (the spawner's state).
func (h *hub) spawn(t *testing.T, user string) int {
	t.Helper()
	h.api(t, "POST", "users", map[string]any{"usernames": []string{user, "bob", "vera"}}, nil)
	h.api(t, "POST", "users/"+user+"/server", nil, nil)
	deadline := time.Now().Add(90 * time.Second)
	for {
		var u struct {
			Servers map[string]struct {
				Ready bool `json:"ready"`
				State struct {
					PID int `json:"pid"`
				} `json:"state"`
			} `json:"servers"`
		}
		h.api(t, "GET", "users/"+user, nil, &u)
		if s, ok := u.Servers[""]; ok && s.Ready {
			return s.State.PID
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's server was not ready within 90 s", user)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// route returns the proxy's route target for user's default server, from
// configurable-http-proxy's REST API (plain http: not under internal SSL).
func (h *hub) route(t *testing.T, user string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://127.0.0.1:"+strconv.Itoa(h.apiPort)+"/api/routes", nil)
	req.Header.Set("Authorization", "token "+h.chpToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var routes map[string]struct {
		Target string `json:"target"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&routes); err != nil {
		t.Fatal(err)
	}
	r, ok := routes["/user/"+user]
	if !ok {
		t.Fatalf("no proxy route for %s: %v", user, routes)
	}
	return r.Target
}

// killUnder kills (SIGKILL) every process whose HOME is dir or below it and
// waits until they are gone; it returns their ids and command names.
func killUnder(dir string) []string {
	var killed []string
	pids := map[int]bool{}
	for range 50 {
		found := false
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if err != nil {
				continue
			}
			for _, kv := range strings.Split(string(env), "\x00") {
				home, ok := strings.CutPrefix(kv, "HOME=")
				if ok && (home == dir || strings.HasPrefix(home, dir+"/")) {
					if !pids[pid] {
						comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
						killed = append(killed, strconv.Itoa(pid)+" "+strings.TrimSpace(string(comm)))
						pids[pid] = true
					}
					syscall.Kill(pid, syscall.SIGKILL)
					found = true
					break
				}
			}
		}
		if !found {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return killed
}

// token creates an API token for user with the given scopes (nil: the
// user's own).
func (h *hub) token(t *testing.T, user string, scopes []string) string {
	t.Helper()
	body := map[string]any{"note": "megane auth test"}
	if scopes != nil {
		body["scopes"] = scopes
	}
	var out struct {
		Token string `json:"token"`
	}
	h.api(t, "POST", "users/"+user+"/tokens", body, &out)
	return out.Token
}

// browserCookie logs user in to the Hub and visits their server the way a
// browser does (following the OAuth redirects), and returns the Cookie header
// the browser then sends to /user/<user>/.
func (h *hub) browserCookie(t *testing.T, user string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 60 * time.Second}
	resp, err := c.Get(h.Public + "hub/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	pub, _ := url.Parse(h.Public)
	var xsrf string
	for _, ck := range jar.Cookies(pub.JoinPath("hub/")) {
		if ck.Name == "_xsrf" {
			xsrf = ck.Value
		}
	}
	resp, err = c.PostForm(h.Public+"hub/login?next=", url.Values{"username": {user}, "password": {"any"}, "_xsrf": {xsrf}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = c.Get(h.Public + "user/" + user + "/view/megane-auth-probe.txt")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var parts []string
	for _, ck := range jar.Cookies(pub.JoinPath("user", user, "/")) {
		parts = append(parts, ck.Name+"="+ck.Value)
	}
	cookie := strings.Join(parts, "; ")
	if !strings.Contains(cookie, "jupyterhub-user-"+user) {
		t.Fatalf("no jupyterhub-user-%s cookie after the OAuth flow (last answer %s %s); cookies: %d", user, resp.Request.URL.Path, resp.Status, len(parts))
	}
	return cookie
}

func TestHub5Verdicts(t *testing.T) {
	root := trixieRoot(t)
	h := startHub(t, root, hubConfig)
	target := h.startServer(t, "alice")
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

	aliceCookie := h.browserCookie(t, "alice")
	aliceAll := h.token(t, "alice", nil)
	aliceAccessOnly := h.token(t, "alice", []string{"access:servers!user=alice"})
	aliceNoAccess := h.token(t, "alice", []string{"read:users!user=alice"})
	bob := h.token(t, "bob", nil)
	vera := h.token(t, "vera", nil)
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

// addRoute adds a configurable-http-proxy route (path prefix → target).
func (h *hub) addRoute(t *testing.T, prefix, target string) {
	t.Helper()
	body := strings.NewReader(`{"target": "` + target + `"}`)
	req, _ := http.NewRequest("POST", "http://127.0.0.1:"+strconv.Itoa(h.apiPort)+"/api/routes"+prefix, body)
	req.Header.Set("Authorization", "token "+h.chpToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("add route %s: %s", prefix, resp.Status)
	}
}

// TestHub3CookieThroughTheChain: browser → configurable-http-proxy →
// (jupyter-server-proxy emulation under /user/alice/megane/) → bridge, which
// asks alice's jupyter_server 1.x single-user server.
func TestHub3CookieThroughTheChain(t *testing.T) {
	if _, err := exec.LookPath("jupyterhub"); err != nil {
		needComponent(t, "jupyterhub (Debian 12)", err)
	}
	if _, err := exec.Command(chpBinary(), "--version").Output(); err != nil {
		needComponent(t, "configurable-http-proxy from npm (.ci/hub-chp.sh)", err)
	}
	h := startHub(t, "", hub3Config)
	target := h.startServer(t, "alice")
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
	h.addRoute(t, "/user/alice/megane", p.URL)

	aliceCookie := h.browserCookie(t, "alice")
	bob := h.token(t, "bob", nil)
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

// chpBinary is configurable-http-proxy as .ci/hub-chp.sh installs it.
func chpBinary() string {
	prefix := os.Getenv("MEGANE_CHP_PREFIX")
	if prefix == "" {
		prefix = "/opt/megane-chp"
	}
	return filepath.Join(prefix, "node_modules", ".bin", "configurable-http-proxy")
}
