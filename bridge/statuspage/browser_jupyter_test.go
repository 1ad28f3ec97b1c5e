package statuspage

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
)

// TestBrowserThroughJupyter runs the chunks scenario in Debian's chromium
// as a JupyterLab user meets the bridge: the real bridge binary registered
// by its own install command, started by the real jupyter-server-proxy
// 4.4.0 inside jupyter_server 2.15 (the Debian 13 chroot), the status page
// and its socket reached only through Jupyter's URL. Large replies travel
// as binary frames, streamed, through the proxy (which relays binary
// frames as bytes).
func TestBrowserThroughJupyter(t *testing.T) {
	env := needBrowser(t)
	root := jupytertest.Trixie(t)
	dir, err := os.MkdirTemp(filepath.Join(root, "tmp"), "megane-browser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := buildBridge(t, dir)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(dir, "tool-server")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tool, b, 0o755); err != nil {
		t.Fatal(err)
	}
	inner := func(p string) string { return strings.TrimPrefix(p, root) }

	// The registration, as an admin writes it: the bridge's install.
	cfgDir := t.TempDir()
	install := exec.Command(bin, "install", "--user", "--bridge", inner(bin))
	install.Env = append(os.Environ(), "JUPYTER_CONFIG_DIR="+cfgDir)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(cfgDir, "jupyter_server_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("install wrote %s: %v", raw, err)
	}
	plain := strings.TrimPrefix(bridgetest.Mode{Name: "flaky"}.Env(), bridgetest.EnvVar+"=")
	cfg["MeganeBuilderTools"] = map[string]any{"mcp_servers": map[string]any{
		"flaky": map[string]any{"command": inner(tool), "args": []string{"-test.run=^$"}, "env": map[string]string{bridgetest.EnvVar: plain}},
	}}
	raw, err = json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}

	j := jupytertest.Start(t, jupytertest.Spec{Root: root, RealServerProxy: true,
		Files: map[string]string{"config/jupyter_server_config.json": string(raw)}})
	var res chunksResult
	scenario(t, env, "chunks", map[string]string{"PAGE_URL": j.URL + "megane/builder-tools/?token=" + j.Token}, &res)
	res.check(t)
	if !strings.Contains(j.Out.String(), "Trying to establish websocket connection to ws://localhost:") {
		t.Errorf("the page's socket did not go through jupyter-server-proxy:\n%s", j.Out)
	}
}
