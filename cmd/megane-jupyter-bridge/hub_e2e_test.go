package main

// The bridge where most people meet it: JupyterHub 5.2 (the Debian 13 chroot
// .ci builds) with configurable-http-proxy, single-user jupyter_server 2.x
// servers at /user/<name>/, the granular authorizer and scopes of
// etc/jupyterhub/, and the real jupyter-server-proxy 4.4.0 (from
// ../shared/vendor) inside the user's server, which starts the bridge from
// either registration: the wheel pip-installed into the server's Python (its
// entry point alone), or what install --absolute-url writes. The page is
// this test, speaking to the Hub's public address only.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
)

// hubE2EConfig is the test's jupyterhub_config.py: jupytertest's, with
// the single-user servers reading their users' own configuration (no
// --config), the real jupyter-server-proxy on PYTHONPATH, this test binary
// running as the program when it is started as the bridge
// (MEGANE_TEST_AS_PROGRAM), and alice's server run by the Python of the venv
// the bridge's wheel is pip-installed in (as an image that pip installs
// the wheel into its Jupyter environment).
const hubE2EConfig = jupytertest.HubTestConfig + `
c.Spawner.args = ["--allow-root"]
c.Spawner.environment = {"PYTHONPATH": d + "/pylib", "MEGANE_TEST_AS_PROGRAM": "1"}
def megane_wheel_venv(spawner):
    if spawner.user.name == "alice":
        spawner.cmd = [d + "/venv/bin/python3", "-m", "jupyterhub.singleuser"]
c.Spawner.pre_spawn_hook = megane_wheel_venv
`

// inChroot runs args inside root with env and returns the combined output,
// failing the test if the command fails.
func inChroot(t *testing.T, root string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("chroot", append([]string{root}, args...)...)
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in %s: %s: %v\n%s", root, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// toolsConfig is a jupyter_server_config.json whose only tool server is a
// well-behaved bridgetest server run by toolBinary, and no registration.
func toolsConfig(t testing.TB, toolBinary string) string {
	t.Helper()
	b, err := json.MarshalIndent(map[string]any{"MeganeBuilderTools": map[string]any{"mcp_servers": map[string]any{
		jupyter.DefaultServerName: nil,
		"bridgetest": map[string]any{"command": toolBinary, "args": []string{"-test.run=^$"},
			"env": map[string]string{bridgetest.EnvVar: strings.TrimPrefix(bridgetest.Mode{}.Env(), bridgetest.EnvVar+"=")}},
	}}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHubEndToEnd: on JupyterHub 5 with the real jupyter-server-proxy,
// alice's server finds the bridge only through the entry point of its
// pip-installed wheel (absolute_url false) and carol's through what
// install --absolute-url writes; through the Hub's public address, each may
// use the tools with a browser cookie, a token header or ?token=; a 40 MB
// result arrives byte-identical to the bridge's own; everyone else is
// refused, by Jupyter (HTTP 403 before the bridge is involved) or by the
// bridge (tools:closing, then a close frame whose code jupyter-server-proxy
// has dropped); and a page that authenticates by cookie leaves no
// credential in the proxy's log.
func TestHubEndToEnd(t *testing.T) {
	root := jupytertest.Trixie(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	users := []struct {
		name     string
		absolute bool
	}{{"alice", false}, {"carol", true}}
	whl := buildLinuxWheel(t)

	// The Hub's directory: this test binary (the bridgetest tool server, and
	// the program install runs as), the example configuration, and each
	// user's Jupyter configuration, as an image would hold them.
	files := map[string]string{}
	for _, u := range users {
		files["home/"+u.name+"/.jupyter/jupyter_server_config.py"] = jupytertest.HubExample(t, "jupyter_server_config.py")
	}
	// alice's server forgets a token's identity after 10 s instead of 300 s,
	// as jupyter/CONFIG.md suggests, so that revocation can be measured.
	const cacheMaxAge = 10 * time.Second
	files["home/alice/.jupyter/jupyter_server_config.py"] += "\nc.HubAuth.cache_max_age = 10\n"
	h := jupytertest.StartHub(t, jupytertest.HubSpec{Root: root, Config: hubE2EConfig, Files: files})
	bin := filepath.Join(h.Inner, "bin", "megane-jupyter-bridge")
	copyExecutable(t, exe, h.Path("bin/megane-jupyter-bridge"))
	var cfgDirs []string
	for _, u := range users {
		cfgDir := h.Path("home/" + u.name + "/.jupyter")
		cfgDirs = append(cfgDirs, cfgDir)
		if err := os.WriteFile(filepath.Join(cfgDir, "jupyter_server_config.json"), []byte(toolsConfig(t, bin)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	jupytertest.RealServerProxy(t, root, h.Path("pylib"), cfgDirs...)
	// alice: the wheel, pip-installed into a venv on the system's Jupyter.
	copyExecutable(t, whl, h.Path("wheel/"+filepath.Base(whl)))
	inChroot(t, root, []string{"HOME=" + h.Inner}, "python3", "-m", "venv", "--system-site-packages", h.Inner+"/venv")
	inChroot(t, root, []string{"HOME=" + h.Inner}, h.Inner+"/venv/bin/python3", "-m", "pip", "install", "--no-index", "--no-deps",
		"--disable-pip-version-check", "-q", h.Inner+"/wheel/"+filepath.Base(whl))
	wheelBin := strings.TrimSpace(inChroot(t, root, nil, h.Inner+"/venv/bin/python3", "-c",
		"import megane_jupyter_bridge as m; print(m.setup_megane()['command'][0])"))
	// carol: install --user --absolute-url, run as her, inside the chroot.
	// (--bridge: without /proc in the chroot the program cannot find itself.)
	out := inChroot(t, root, []string{"HOME=" + h.Inner + "/home/carol", asProgramEnv + "=1"}, bin, "install", "--user", "--absolute-url", "--bridge", bin)
	if !strings.Contains(out, "registered \"megane\"") {
		t.Fatalf("install --absolute-url: %s", out)
	}

	// What the bridge alone returns for the same call, for the byte
	// comparison: the same program and tool server, standalone.
	const atoms = 500000
	want := func() []byte {
		r := startServe(t, "--standalone", "--token", "ref-token-0123456789", "--servers", bridgetestServersFile(t, exe))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p, _, err := bridgetest.Dial(ctx, "ws://"+r.addr+"/megane/builder-tools/ws?token=ref-token-0123456789", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		connectBridgetest(t, p)
		callAtoms(t, p, "warm", 10)
		start := time.Now()
		res := callAtoms(t, p, "ref", atoms)
		t.Logf("%d-byte result from the bridge alone: %s", len(res), time.Since(start).Round(time.Millisecond))
		return res
	}()
	if len(want) < 39e6 {
		t.Fatalf("the reference result is %d bytes, want about 40 MB", len(want))
	}

	for _, u := range users {
		t.Run(u.name+" absolute_url="+strconv.FormatBool(u.absolute), func(t *testing.T) {
			h.Spawn(t, u.name)
			public := h.Public + "user/" + u.name + "/"
			cookie := h.BrowserCookie(t, u.name)
			all := h.Token(t, u.name, nil)
			accessOnly := h.Token(t, u.name, []string{"access:servers!user=" + u.name})
			vera := h.Token(t, "vera", nil)
			bob := h.Token(t, "bob", nil)
			same := strings.TrimSuffix(h.Public, "/")

			// Revocation: a socket opened with a token that is then revoked
			// at the Hub is closed by the bridge's next re-check after the
			// server's cache has let the token go. The wait overlaps the
			// cases below and is checked at the end.
			var revoked *bridgetest.Page
			var revokedAt time.Time
			if u.name == "alice" {
				tok, id := h.TokenWithID(t, u.name, nil)
				p, _, err := proxiedPage(t, public, "", http.Header{"Authorization": {"token " + tok}})
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				connectBridgetest(t, p)
				h.RevokeToken(t, u.name, id)
				revoked, revokedAt = p, time.Now()
			}

			t.Run("browser cookie: a 40 MB result through every hop, byte-exact", func(t *testing.T) {
				p, _, err := proxiedPage(t, public, "", http.Header{"Cookie": {cookie}, "Origin": {same}})
				if err != nil {
					t.Fatalf("dial: %v\n%s", err, h.Out)
				}
				if got := connectBridgetest(t, p); got != u.name {
					t.Fatalf("admitted as %q, want %q", got, u.name)
				}
				callAtoms(t, p, "warm", 10)
				start := time.Now()
				got := callAtoms(t, p, "big", atoms)
				t.Logf("the same through configurable-http-proxy and jupyter-server-proxy: %s", time.Since(start).Round(time.Millisecond))
				if !bytes.Equal(got, want) {
					t.Fatalf("the result through the Hub differs from the bridge's own: %d bytes, want %d", len(got), len(want))
				}
				if size, _ := p.MaxFrame(); size > 10<<20 {
					t.Fatalf("a %d-byte frame passed jupyter-server-proxy's 10 MiB limit", size)
				}
			})
			for _, tc := range []struct {
				name   string
				query  string
				header http.Header
			}{
				{"token header", "", http.Header{"Authorization": {"token " + all}}},
				{"?token= with Sec-Fetch-Mode: websocket, as a browser sends it", "?token=" + all, http.Header{"Sec-Fetch-Mode": {"websocket"}, "Origin": {same}}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					p, _, err := proxiedPage(t, public, tc.query, tc.header)
					if err != nil {
						t.Fatalf("dial: %v", err)
					}
					if got := connectBridgetest(t, p); got != u.name {
						t.Fatalf("admitted as %q, want %q", got, u.name)
					}
				})
			}
			// Refused by the bridge: Jupyter lets them in (jupyter-server-proxy
			// never asks the authorizer), the bridge asks and says why.
			for _, tc := range []struct {
				name, token, reason string
			}{
				{"viewer with read-only access", vera, `"vera" may not execute kernels`},
				{"owner's token with access but without the execute scope", accessOnly, "may not execute kernels"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					p, _, err := proxiedPage(t, public, "", http.Header{"Authorization": {"token " + tc.token}})
					if err != nil {
						t.Fatalf("want a tools:closing, the upgrade failed: %v", err)
					}
					checkClosing(t, p, bridge.CloseForbidden, tc.reason)
				})
			}
			// Refused by Jupyter before the bridge: a plain HTTP 403 (a
			// browser reports 1006).
			for _, tc := range []struct {
				name   string
				query  string
				header http.Header
			}{
				{"no credentials", "", nil},
				{"a user without access to the server", "", http.Header{"Authorization": {"token " + bob}}},
				{"a bad token", "", http.Header{"Authorization": {"token 0123456789abcdef"}}},
				{"?token= without Sec-Fetch-Mode (JupyterHub 5 refuses it)", "?token=" + all, nil},
				{"the browser cookie from another Origin", "", http.Header{"Cookie": {cookie}, "Origin": {"http://evil.example"}}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					_, resp, err := proxiedPage(t, public, tc.query, tc.header)
					if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
						t.Fatalf("want HTTP 403 from Jupyter, got %v %v", resp, err)
					}
				})
			}
			t.Run("started by jupyter-server-proxy from the "+map[bool]string{false: "wheel's entry point", true: "registration install wrote"}[u.absolute], func(t *testing.T) {
				wantBin := bin
				if !u.absolute {
					wantBin = wheelBin
				}
				var found [][]string
				for _, cmd := range cmdlinesUnder(h.Inner + "/home/" + u.name) {
					if len(cmd) > 1 && cmd[1] == "serve" {
						found = append(found, cmd)
					}
				}
				if len(found) != 1 || found[0][0] != wantBin {
					t.Fatalf("bridges running in %s's server: %q, want one running %s", u.name, found, wantBin)
				}
				// What jupyter-server-proxy logs for each socket: the path the
				// registration's mode forwards.
				path := "/builder-tools/ws"
				if u.absolute {
					path = "/user/" + u.name + "/megane/builder-tools/ws"
				}
				if !regexp.MustCompile(`Trying to establish websocket connection to ws://localhost:\d+` + regexp.QuoteMeta(path)).MatchString(h.Out.String()) {
					t.Errorf("jupyter-server-proxy logged no socket to %s:\n%s", path, h.Out)
				}
			})
			// A JupyterLab page under the Hub has the user's cookie and may
			// also have a token: the client module uses the cookie, and
			// jupyter-server-proxy's log shows no token.
			t.Run("the client module: the cookie, no token in jupyter-server-proxy's log", func(t *testing.T) {
				node := needNode22(t)
				pageToken := h.Token(t, u.name, nil)
				by, user := pageModule(t, node, public, cookie, same, pageToken)
				if by != "cookie" || user != u.name {
					t.Fatalf("the module authenticated by %q as %q, want by the cookie as %s", by, user, u.name)
				}
				if !strings.Contains(h.Out.String(), "Trying to establish websocket connection") || strings.Contains(h.Out.String(), pageToken) {
					t.Fatalf("jupyter-server-proxy's log has no socket, or the page's token:\n%s", h.Out)
				}
			})
			t.Run("status page", func(t *testing.T) {
				status, body := httpGet(t, public+"megane/builder-tools/", http.Header{"Cookie": {cookie}})
				if status != 200 || !strings.Contains(body, "app.js") {
					t.Fatalf("status page: %d %.300s", status, body)
				}
			})
			if revoked != nil {
				t.Run("a revoked token's socket is closed", func(t *testing.T) {
					// HubAuth.cache_max_age, then at most one re-check
					// interval (60 s), and slack for a loaded machine.
					bound := cacheMaxAge + 60*time.Second + 20*time.Second
					select {
					case <-revoked.Done():
					case <-time.After(bound - time.Since(revokedAt)):
						t.Fatalf("the socket of a revoked token is still open %s after the revocation", bound)
					}
					t.Logf("closed %s after the token was revoked (cache_max_age %s, re-check every 60 s)", time.Since(revokedAt).Round(time.Second), cacheMaxAge)
					checkClosing(t, revoked, bridge.CloseForbidden, "")
				})
			}
			// Last: it kills the proxy under every socket of this user.
			if u.name == "alice" {
				t.Run("configurable-http-proxy killed mid-call: the page resumes through the new one", func(t *testing.T) {
					proxyResume(t, h, public, http.Header{"Cookie": {cookie}, "Origin": {same}})
				})
			}
			// The bridge's log lines (slog's, among the Hub's and the
			// servers') name no credential and no unserved path.
			for _, line := range strings.Split(h.Out.String(), "\n") {
				if !strings.Contains(line, "level=") {
					continue
				}
				for _, secret := range []string{all, accessOnly, vera, bob, cookieValue(cookie)} {
					if strings.Contains(line, secret) {
						t.Errorf("the bridge logged a credential: %.200s", line)
					}
				}
				if strings.Contains(line, "path not served") {
					t.Errorf("the bridge logged a path it does not serve: %s", line)
				}
			}
		})
	}
}

// checkClosing asserts that the page got tools:closing with code and a
// reason containing reason, and then the close frame jupyter-server-proxy
// makes of the bridge's (no code: 1005).
func checkClosing(t *testing.T, p *bridgetest.Page, code int, reason string) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("the socket was not closed")
	}
	var closing *bridgetest.Msg
	for _, m := range p.All() {
		if m.Type == "tools:closing" {
			closing = m
		}
	}
	if closing == nil || string(closing.Fields["code"]) != strconv.Itoa(code) || !strings.Contains(closing.Str("reason"), reason) {
		t.Fatalf("want tools:closing %d ~%q, got %v (%v)", code, reason, closing, p.Err())
	}
	var ce *websocket.CloseError
	if !errors.As(p.Err(), &ce) || ce.Code != websocket.CloseNoStatusReceived {
		t.Fatalf("want a close frame without a code after tools:closing, got %v", p.Err())
	}
}

// cmdlinesUnder returns the command lines of the processes whose HOME is
// home (inside a chroot too: the host's /proc shows every process).
func cmdlinesUnder(home string) [][]string {
	var out [][]string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(append([]byte{0}, env...), []byte("\x00HOME="+home+"\x00")) {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, strings.Split(strings.TrimSuffix(string(cmd), "\x00"), "\x00"))
	}
	return out
}

func cookieValue(cookie string) string {
	for _, part := range strings.Split(cookie, ";") {
		if _, v, ok := strings.Cut(strings.TrimSpace(part), "="); ok && len(v) > 16 {
			return v
		}
	}
	return cookie
}

// bridgetestServersFile is a servers file whose only server is a
// bridgetest server run by exe.
func bridgetestServersFile(t *testing.T, exe string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "servers.json")
	text := fmt.Sprintf(`{"mcpServers": {"bridgetest": {"command": %q, "args": ["-test.run=^$"], "env": {%q: "{}"}}}}`, exe, bridgetest.EnvVar)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func copyExecutable(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// proxyResume opens a page session through the Hub, starts a 6-second
// call, kills configurable-http-proxy once the first progress arrives (the
// Hub starts a new one within check_running_interval, 5 s), and resumes
// through the new proxy: the call's result arrives, once.
func proxyResume(t *testing.T, h *jupytertest.Hub, public string, header http.Header) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, _, err := proxiedPage(t, public, "", header)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	hello, err := p.Request(ctx, map[string]any{"type": "tools:hello", "id": "h", "features": []string{"resume"}})
	if err != nil || hello.OK == nil || !*hello.OK {
		t.Fatalf("hello: %v %v", err, hello)
	}
	var session struct{ Token string }
	json.Unmarshal(hello.Fields["session"], &session)
	connectBridgetest(t, p)
	if err := p.Send(map[string]any{"type": "tools:call", "id": "long", "server": "bridgetest", "tool": "slow",
		"arguments": map[string]any{"steps": 60, "intervalMs": 100, "tag": "chp"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" }); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for _, m := range p.All() {
		var n uint64
		json.Unmarshal(m.Fields["n"], &n)
		last = max(last, n)
	}
	pidText, err := os.ReadFile(h.Path("proxy.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	proc, err := os.FindProcess(pid)
	if err == nil {
		err = proc.Kill()
	}
	if err != nil {
		t.Fatalf("kill configurable-http-proxy (pid %d): %v", pid, err)
	}
	<-p.Done()
	var q *bridgetest.Page
	for {
		if q, _, err = proxiedPage(t, public, "", header); err == nil {
			break
		}
		if time.Since(killed) > time.Minute {
			t.Fatalf("no proxy a minute after the kill: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("a socket through the new proxy %s after the kill", time.Since(killed).Round(time.Millisecond))
	again, err := q.Request(ctx, map[string]any{"type": "tools:hello", "id": "h2", "features": []string{"resume"},
		"resume": map[string]any{"token": session.Token, "n": last}})
	if err != nil || !strings.Contains(again.String(), `"resumed":true`) {
		t.Fatalf("resume through the new proxy: %v %v", err, again)
	}
	got, err := q.Reply(ctx, "tools:call", "long")
	if err != nil || got.OK == nil || !*got.OK || !strings.Contains(got.String(), `"steps":60,"tag":"chp"`) {
		t.Fatalf("the call's result after the resume: %v %.300s", err, got)
	}
	time.Sleep(300 * time.Millisecond)
	n := 0
	for _, m := range q.All() {
		if m.Type == "tools:call" && string(m.ID) == `"long"` {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the result arrived %d times on the new socket", n)
	}
}
