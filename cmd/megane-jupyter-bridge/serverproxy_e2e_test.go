package main

// The bridge as deployments run it: started by (a tornado stand-in for)
// jupyter-server-proxy inside a real jupyter_server, from the registration
// install writes, with {port} and {base_url} filled in, and reached only
// through the Jupyter server's own URL. Every base URL and both path modes.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
)

// proxiedConfig is a jupyter_server_config.json holding the registration
// install writes for binary (in mode absoluteURL) and, as the bridge's only
// tool server, a well-behaved bridgetest server run by toolBinary.
func proxiedConfig(t testing.TB, binary, toolBinary string, absoluteURL bool) string {
	return proxiedConfigMode(t, binary, toolBinary, absoluteURL, bridgetest.Mode{})
}

// proxiedConfigMode is proxiedConfig with a bridgetest server that behaves
// as mode says.
func proxiedConfigMode(t testing.TB, binary, toolBinary string, absoluteURL bool, mode bridgetest.Mode) string {
	t.Helper()
	cfg := map[string]any{
		"ServerProxy": map[string]any{"servers": map[string]any{
			jupyter.ProxyServerName: jupyter.Registration(binary, "", absoluteURL),
		}},
		"MeganeBuilderTools": map[string]any{"mcp_servers": map[string]any{
			jupyter.DefaultServerName: nil,
			"bridgetest": map[string]any{"command": toolBinary, "args": []string{"-test.run=^$"},
				"env": map[string]string{bridgetest.EnvVar: strings.TrimPrefix(mode.Env(), bridgetest.EnvVar+"=")}},
		}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// proxiedPage dials the bridge's socket through the Jupyter server at
// publicBase (".../user/alice/"), as the Builder page does; query is ""
// or "?…".
func proxiedPage(t testing.TB, publicBase, query string, header http.Header) (*bridgetest.Page, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws := "ws" + strings.TrimPrefix(publicBase, "http") + "megane/builder-tools/ws" + query
	p, resp, err := bridgetest.Dial(ctx, ws, header)
	if err == nil {
		t.Cleanup(func() { p.Close() })
	}
	return p, resp, err
}

// connectServer lists the servers and connects to name, confirming it (the
// fingerprint from the list); it returns both replies.
func connectServer(t testing.TB, ctx context.Context, p *bridgetest.Page, name string) (servers, connected *bridgetest.Msg) {
	t.Helper()
	m, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": "servers"})
	if err != nil || m.OK == nil || !*m.OK {
		t.Fatalf("tools:servers: %v %v", err, m)
	}
	var list []struct{ Name, Fingerprint string }
	json.Unmarshal(m.Fields["servers"], &list)
	fp := ""
	for _, s := range list {
		if s.Name == name {
			fp = s.Fingerprint
		}
	}
	if fp == "" {
		t.Fatalf("%s is not listed: %s", name, m)
	}
	c, err := p.Request(ctx, map[string]any{"type": "tools:connect", "id": "connect", "server": name, "fingerprint": fp, "confirmed": true})
	if err != nil || c.OK == nil || !*c.OK {
		t.Fatalf("connect %s: %v %v", name, err, c)
	}
	return m, c
}

// connectBridgetest connects to bridgetest (confirming it) and returns the
// user the bridge admitted.
func connectBridgetest(t testing.TB, p *bridgetest.Page) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, _ := connectServer(t, ctx, p, "bridgetest")
	return m.Str("user")
}

// callAtoms calls the bridgetest atoms tool (n atoms of water, seed 7) and
// returns the result exactly as it reached the page (reassembled if it came
// in chunks).
func callAtoms(t testing.TB, p *bridgetest.Page, id string, n int) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	call, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": id, "server": "bridgetest", "tool": "atoms",
		"arguments": map[string]any{"n": n, "seed": 7}})
	if err != nil || call.OK == nil || !*call.OK {
		t.Fatalf("atoms: %v %.300s", err, call)
	}
	return call.Fields["result"]
}

func httpGet(t *testing.T, url string, header http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	c := http.Client{Timeout: 60 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServerProxyEndToEnd: the bridge registered in both path modes, at /
// and at /lab/base/, started by jupyter-server-proxy inside a real
// jupyter_server: the real jupyter-server-proxy 4.4.0 in jupyter_server 2.15
// (the Debian 13 chroot), and the stand-in in Debian 12's jupyter_server
// 1.23, which the real one does not support. A page reaches the socket and
// the status page through Jupyter's URL, runs a tool, and the refusals
// Jupyter makes before the bridge is involved are plain HTTP 403s.
func TestServerProxyEndToEnd(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, jup := range []struct {
		name string
		real bool
	}{{"jupyter_server 1.23 with the stand-in", false}, {"jupyter_server 2.15 with jupyter-server-proxy 4.4.0", true}} {
		t.Run(jup.name, func(t *testing.T) {
			root, bin := "", exe
			if jup.real {
				root = jupytertest.Trixie(t)
				dir, err := os.MkdirTemp(filepath.Join(root, "tmp"), "megane-bin-")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(dir) })
				copyExecutable(t, exe, filepath.Join(dir, "megane-jupyter-bridge"))
				bin = strings.TrimPrefix(filepath.Join(dir, "megane-jupyter-bridge"), root)
			}
			serverProxyEndToEnd(t, root, bin, jup.real)
		})
	}
}

// redactTokenConfig is the logging filter jupyter/CONFIG.md gives admins,
// verbatim: it redacts query tokens in the lines jupyter-server-proxy logs
// through Jupyter's ServerApp logger.
const redactTokenConfig = `import logging, re

class RedactQueryToken(logging.Filter):
    def filter(self, record):
        msg = record.getMessage()
        if "token=" in msg:
            record.msg, record.args = re.sub(r"token=[^&\s]+", "token=[redacted]", msg), None
        return True

logging.getLogger("ServerApp").addFilter(RedactQueryToken())
`

func serverProxyEndToEnd(t *testing.T, root, exe string, real bool) {
	for _, base := range []string{"/", "/lab/base/"} {
		for _, abs := range []bool{false, true} {
			name := base + " absolute_url=" + map[bool]string{false: "false", true: "true"}[abs]
			t.Run(name, func(t *testing.T) {
				files := map[string]string{"config/jupyter_server_config.json": proxiedConfig(t, exe, exe, abs)}
				if real && base != "/" {
					files["config/jupyter_server_config.py"] = redactTokenConfig
				}
				j := jupytertest.Start(t, jupytertest.Spec{Root: root, BaseURL: base, ServerProxy: !real, RealServerProxy: real,
					Env: []string{asProgramEnv + "=1"}, Files: files})
				token := http.Header{"Authorization": {"token " + j.Token}}
				p, _, err := proxiedPage(t, j.URL, "", token)
				if err != nil {
					t.Fatalf("the socket through Jupyter at %s: %v\n%s", j.URL, err, j.Out)
				}
				connectBridgetest(t, p)
				if res := callAtoms(t, p, "a", 30); !strings.Contains(string(res), `"water-30"`) {
					t.Fatalf("atoms result: %.300s", res)
				}
				// The status page and its script, through Jupyter.
				status, body := httpGet(t, j.URL+"megane/builder-tools/", token)
				if status != 200 || !strings.Contains(body, "app.js") {
					t.Fatalf("status page: %d %.300s", status, body)
				}
				if status, body := httpGet(t, j.URL+"megane/builder-tools/app.js", token); status != 200 || !strings.Contains(body, "WebSocket") {
					t.Fatalf("app.js: %d %.100s", status, body)
				}
				// Refused by Jupyter (jupyter-server-proxy authenticates
				// first): the upgrade fails with 403, which a browser reports
				// as 1006.
				for _, tc := range []struct {
					name   string
					header http.Header
				}{
					{"no credentials", nil},
					{"wrong token", http.Header{"Authorization": {"token wrong"}}},
					{"login cookie from another Origin", http.Header{"Cookie": {j.LoginCookie(t)}, "Origin": {"http://evil.example"}}},
				} {
					if _, resp, err := proxiedPage(t, j.URL, "", tc.header); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
						t.Errorf("%s: want HTTP 403 from Jupyter, got %v %v", tc.name, resp, err)
					}
				}
				if real {
					// A JupyterLab page has Jupyter's login cookie and the
					// server's token: the client module uses the cookie, so
					// jupyter-server-proxy's log shows no token. Only when the
					// cookie is refused does the token go in the URL, and then
					// that log shows it (jupyter/CONFIG.md tells admins).
					node := needNode22(t)
					origin := strings.TrimSuffix(strings.TrimSuffix(j.URL, base), "/")
					if by, _ := pageModule(t, node, j.URL, j.LoginCookie(t), origin, j.Token); by != "cookie" {
						t.Errorf("the client module authenticated by %q, want the cookie", by)
					}
					if !strings.Contains(j.Out.String(), "Trying to establish websocket connection") || strings.Contains(j.Out.String(), j.Token) {
						t.Errorf("jupyter-server-proxy's log has no socket, or the server's token:\n%s", j.Out)
					}
					if by, _ := pageModule(t, node, j.URL, "username-expired=x", origin, j.Token); by != "token" {
						t.Errorf("with a refused cookie the client module authenticated by %q, want the token", by)
					}
					if base == "/" && !strings.Contains(j.Out.String(), "?token="+j.Token) {
						t.Errorf("jupyter-server-proxy no longer logs a query token: update jupyter/CONFIG.md")
					}
					// At /lab/base/ the server has the logging filter
					// CONFIG.md gives admins: the token is redacted.
					if base != "/" && (strings.Contains(j.Out.String(), j.Token) || !strings.Contains(j.Out.String(), "?token=[redacted]")) {
						t.Errorf("CONFIG.md's filter did not redact the query token:\n%s", j.Out)
					}
				}
				started := "megane_test_server_proxy: starting"
				if real {
					// The real one's log line for the socket, with the path
					// the mode forwards.
					started = "Trying to establish websocket connection to ws://localhost:"
				}
				if !strings.Contains(j.Out.String(), started) {
					t.Errorf("the bridge was not started and reached by jupyter-server-proxy (no %q):\n%s", started, j.Out)
				}
				if strings.Contains(j.Out.String(), "path not served") {
					t.Errorf("the bridge logged a path it does not serve:\n%s", j.Out)
				}
			})
		}
	}
}
