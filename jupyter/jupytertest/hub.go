package jupytertest

// A real JupyterHub for tests: JupyterHub 5 in the Debian 13 chroot, or
// Debian 12's JupyterHub 3 on the host, with its configurable-http-proxy,
// on free loopback ports, with a service token for the REST API.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
)

// HubTestConfig begins a test's jupyterhub_config.py (a HubSpec.Config
// template): the deployment example etc/jupyterhub/jupyterhub_config.py as
// it is (StartHub copies it into the Hub's directory), then what only a
// test needs: loopback ports, a dummy authenticator, servers run as local
// processes under the Hub's directory, the tester service, and vera, who
// may open alice's and carol's servers and read but not execute. A test
// adds c.Spawner.args and c.Spawner.environment.
const HubTestConfig = `
c = get_config()
d = %[1]q
load_subconfig(d + "/etc/jupyterhub_config.py")
# %[7]q is configurable-http-proxy on the host; in a chroot its own is used.
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
c.Spawner.http_timeout = 60
c.JupyterHub.services = [{"name": "tester", "api_token": %[6]q}]
c.JupyterHub.load_roles = c.JupyterHub.load_roles + [
    {"name": "viewer", "users": ["vera"], "scopes": [
        "access:servers!user=alice", "custom:jupyter_server:read:*!user=alice",
        "access:servers!user=carol", "custom:jupyter_server:read:*!user=carol"]},
    {"name": "tester", "services": ["tester"], "scopes": ["admin:users", "admin:servers", "tokens", "list:users", "read:users"]},
]
`

// HubExample returns the file name of etc/jupyterhub/ in this repository
// (jupyterhub_config.py, jupyter_server_config.py): the deployment
// examples the Hub tests load as they are.
func HubExample(t testing.TB, name string) string {
	t.Helper()
	_, here, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the repository")
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "etc", "jupyterhub", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// HubSpec says how to start a Hub.
type HubSpec struct {
	// Root is the chroot to run it in; "" means the host. In a chroot the
	// Hub runs in a mount namespace of its own with /proc mounted (the
	// bridge, started under a single-user server, needs it), which ends
	// with the Hub's processes.
	Root string
	// Config is jupyterhub_config.py as a fmt template: %[1]q is the Hub's
	// directory (as the Hub sees it), %[2]d its public port, %[3]d the Hub
	// API port, %[4]d configurable-http-proxy's API port, %[5]q its token,
	// %[6]q the token of the "tester" service the config must declare,
	// %[7]q CHPBinary.
	Config string
	// Files are written into the Hub's directory before it starts, by
	// relative path (directories are made as needed). StartHub adds
	// etc/jupyterhub_config.py, the example HubTestConfig loads.
	Files map[string]string
}

// Hub is a running JupyterHub.
type Hub struct {
	Public   string // http://127.0.0.1:<port>/
	HostHdr  string
	APIToken string // the tester service's token
	APIPort  int    // configurable-http-proxy's REST API
	CHPToken string // its token
	// Dir is the Hub's directory as seen from the host; Inner the same
	// as the Hub sees it.
	Dir, Inner string
	Out        *bridgetest.Buffer // the Hub's output (and what its children write there)
}

// Path is name inside the Hub's directory, as seen from the host.
func (h *Hub) Path(name string) string { return filepath.Join(h.Dir, name) }

// StartHub starts JupyterHub as spec says and waits (up to 90 s) until its
// API answers. Everything it started is stopped when the test ends.
func StartHub(t testing.TB, spec HubSpec) *Hub {
	root := spec.Root
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
	port, hubPort, apiPort := bridgetest.FreePort(t), bridgetest.FreePort(t), bridgetest.FreePort(t)
	svcToken, chpToken := token(t), token(t)
	conf := fmt.Sprintf(spec.Config, inner, port, hubPort, apiPort, chpToken, svcToken, CHPBinary())
	files := map[string]string{"jupyterhub_config.py": conf, "etc/jupyterhub_config.py": HubExample(t, "jupyterhub_config.py")}
	for k, v := range spec.Files {
		files[k] = v
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := "cd " + inner + " && exec jupyterhub -f " + inner + "/jupyterhub_config.py"
	args := []string{"/bin/sh", "-c", start}
	if root != "" {
		// unshare execs, so the Hub keeps this process's id and group.
		chroot, err := exec.LookPath("chroot")
		if err != nil {
			chroot = "/usr/sbin/chroot"
		}
		args = []string{"unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
			`mount -t proc proc "$0/proc" && exec "$1" "$0" /bin/sh -c "$2"`, root, chroot, start}
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + inner, "LANG=C.UTF-8"}
	out := &bridgetest.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	child.InGroup(cmd)
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
		child.Interrupt(cmd.Process)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			child.KillGroup(cmd.Process)
			<-done
		}
		child.KillGroup(cmd.Process)
		// Whatever the Hub left behind (it was killed, or did not finish)
		// still has its HOME under dir: the proxy inherits the Hub's, the
		// servers and their kernels have dir/home/<user>.
		if left := KillUnder(inner); len(left) > 0 {
			t.Logf("killed processes the Hub left running: %v", left)
		}
		if t.Failed() {
			t.Logf("jupyterhub output:\n%s", out.String())
		}
	})
	h := &Hub{Public: "http://127.0.0.1:" + strconv.Itoa(port) + "/", HostHdr: "127.0.0.1:" + strconv.Itoa(port),
		APIToken: svcToken, APIPort: apiPort, CHPToken: chpToken, Dir: dir, Inner: inner, Out: out}
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

// API calls the Hub's REST API as the tester service.
func (h *Hub) API(t testing.TB, method, path string, body any, into any) int {
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

// StartServer starts user's default server and returns its internal URL
// (the proxy's route target) once it is ready.
func (h *Hub) StartServer(t testing.TB, user string) string {
	t.Helper()
	h.Spawn(t, user)
	return h.Route(t, user)
}

// Spawn creates the users user, bob and vera, starts user's default
// server, waits until the Hub says it is ready, and returns its process id
// (the spawner's state).
func (h *Hub) Spawn(t testing.TB, user string) int {
	t.Helper()
	h.API(t, "POST", "users", map[string]any{"usernames": []string{user, "bob", "vera"}}, nil)
	h.API(t, "POST", "users/"+user+"/server", nil, nil)
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
		h.API(t, "GET", "users/"+user, nil, &u)
		if s, ok := u.Servers[""]; ok && s.Ready {
			return s.State.PID
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's server was not ready within 90 s", user)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// Route returns the proxy's route target for user's default server, from
// configurable-http-proxy's REST API (plain http: not under internal SSL).
func (h *Hub) Route(t testing.TB, user string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://127.0.0.1:"+strconv.Itoa(h.APIPort)+"/api/routes", nil)
	req.Header.Set("Authorization", "token "+h.CHPToken)
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

// KillUnder kills (SIGKILL) every process whose HOME is dir or below it and
// waits until they are gone; it returns their ids and command names.
func KillUnder(dir string) []string {
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
					if p, err := os.FindProcess(pid); err == nil {
						p.Kill()
					}
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

// Token creates an API token for user with the given scopes (nil: the
// user's own).
func (h *Hub) Token(t testing.TB, user string, scopes []string) string {
	t.Helper()
	token, _ := h.TokenWithID(t, user, scopes)
	return token
}

// TokenWithID is Token, also returning the token's id (for RevokeToken).
func (h *Hub) TokenWithID(t testing.TB, user string, scopes []string) (token, id string) {
	t.Helper()
	body := map[string]any{"note": "megane auth test"}
	if scopes != nil {
		body["scopes"] = scopes
	}
	var out struct {
		Token string `json:"token"`
		ID    string `json:"id"`
	}
	h.API(t, "POST", "users/"+user+"/tokens", body, &out)
	return out.Token, out.ID
}

// RevokeToken deletes user's token with id at the Hub.
func (h *Hub) RevokeToken(t testing.TB, user, id string) {
	t.Helper()
	h.API(t, "DELETE", "users/"+user+"/tokens/"+id, nil, nil)
}

// BrowserCookie logs user in to the Hub and visits their server the way a
// browser does (following the OAuth redirects), and returns the Cookie header
// the browser then sends to /user/<user>/.
func (h *Hub) BrowserCookie(t testing.TB, user string) string {
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

// AddRoute adds a configurable-http-proxy route (path prefix → target).
func (h *Hub) AddRoute(t testing.TB, prefix, target string) {
	t.Helper()
	body := strings.NewReader(`{"target": "` + target + `"}`)
	req, _ := http.NewRequest("POST", "http://127.0.0.1:"+strconv.Itoa(h.APIPort)+"/api/routes"+prefix, body)
	req.Header.Set("Authorization", "token "+h.CHPToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("add route %s: %s", prefix, resp.Status)
	}
}

// CHPBinary is configurable-http-proxy as .ci/hub-chp.sh installs it.
func CHPBinary() string {
	prefix := os.Getenv("MEGANE_CHP_PREFIX")
	if prefix == "" {
		prefix = "/opt/megane-chp"
	}
	return filepath.Join(prefix, "node_modules", ".bin", "configurable-http-proxy")
}
