package jupyter

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// showConfig runs the real server's --show-config-json in the sandbox (this
// initializes the server: it writes a cookie secret into the sandbox's
// runtime dir and, on 1.23, binds a free loopback port) and returns the
// merged configuration.
func showConfig(t *testing.T, py string, s *sandbox) map[string]map[string]json.RawMessage {
	t.Helper()
	cmd := exec.Command(py, "-m", "jupyter_server", "--show-config-json", "--no-browser",
		"--ip=127.0.0.1", "--port="+strconv.Itoa(bridgetest.FreePort(t)), "--ServerApp.port_retries=0")
	cmd.Env = s.environ()
	cmd.Dir = s.root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("--show-config-json: %v", err)
	}
	var cfg map[string]map[string]json.RawMessage
	must(t, json.Unmarshal(out, &cfg))
	return cfg
}

// realServers is the effective MeganeBuilderTools.mcp_servers as name ->
// command (null entries left out).
func realServers(t *testing.T, cfg map[string]map[string]json.RawMessage) map[string]string {
	out := map[string]string{}
	raw, ok := cfg["MeganeBuilderTools"]["mcp_servers"]
	if !ok {
		return out
	}
	var m map[string]*struct {
		Command string `json:"command"`
	}
	must(t, json.Unmarshal(raw, &m))
	for k, v := range m {
		if v != nil {
			out[k] = v.Command
		}
	}
	return out
}

func ourServers(cfg *Config) map[string]string {
	out := map[string]string{}
	for _, e := range cfg.Servers {
		if e.Level != LevelDefault {
			out[e.Name] = e.Command
		}
	}
	return out
}

// TestPrecedenceMatchesTraitlets writes .py and .json files at several
// levels and checks that the servers read are exactly those the real
// Jupyter server ends up with.
func TestPrecedenceMatchesTraitlets(t *testing.T) {
	py := needJupyter(t)
	pyAssign := func(names ...string) string {
		var parts []string
		for _, n := range names {
			parts = append(parts, `"`+n+`": {"command": "cmd-`+n+`"}`)
		}
		return "c.MeganeBuilderTools.mcp_servers = {" + strings.Join(parts, ", ") + "}\n"
	}
	jsonAssign := func(names ...string) string {
		var parts []string
		for _, n := range names {
			parts = append(parts, `"`+n+`": {"command": "cmd-`+n+`"}`)
		}
		return `{"MeganeBuilderTools": {"mcp_servers": {` + strings.Join(parts, ", ") + "}}}\n"
	}
	tests := []struct {
		name      string
		files     map[string]string // relative to the sandbox; hi/ is on JUPYTER_CONFIG_PATH, cfg/ is JUPYTER_CONFIG_DIR, home/.local/etc/jupyter is the userbase level
		want      []string
		wantFiles []string
		problem   string
	}{
		{"json beats py in one directory", map[string]string{
			"cfg/jupyter_server_config.py":   pyAssign("from-py"),
			"cfg/jupyter_server_config.json": jsonAssign("from-json"),
		}, []string{"from-json"}, []string{"cfg/jupyter_server_config.json"}, ""},
		{"higher directory replaces the value whole", map[string]string{
			"hi/jupyter_server_config.py":    pyAssign("high"),
			"cfg/jupyter_server_config.json": jsonAssign("low1", "low2"),
		}, []string{"high"}, []string{"hi/jupyter_server_config.py"}, ""},
		{"userbase level is below the config dir", map[string]string{
			"home/.local/etc/jupyter/jupyter_server_config.json": jsonAssign("userbase"),
			"cfg/jupyter_server_config.json":                     jsonAssign("cfgdir"),
		}, []string{"cfgdir"}, []string{"cfg/jupyter_server_config.json"}, ""},
		{"update() adds to the lower value", map[string]string{
			"hi/jupyter_server_config.py":    "c.MeganeBuilderTools.mcp_servers.update({'added': {'command': 'cmd-added'}, 'low1': {'command': 'cmd-low1b'}})\n",
			"cfg/jupyter_server_config.json": jsonAssign("low1", "low2"),
		}, []string{"added", "low1", "low2"}, []string{"cfg/jupyter_server_config.json", "hi/jupyter_server_config.py"}, ""},
		{"jupyter_server_config beats jupyter_config at any level", map[string]string{
			"hi/jupyter_config.json":         jsonAssign("generic"),
			"cfg/jupyter_server_config.json": jsonAssign("server"),
		}, []string{"server"}, []string{"cfg/jupyter_server_config.json"}, ""},
		{"jupyter_config alone counts", map[string]string{
			"cfg/jupyter_config.py": pyAssign("generic"),
		}, []string{"generic"}, []string{"cfg/jupyter_config.py"}, ""},
		{"a .py that raises is skipped whole", map[string]string{
			"hi/jupyter_server_config.py":    pyAssign("never") + "raise ValueError('broken on purpose')\n",
			"cfg/jupyter_server_config.json": jsonAssign("kept"),
		}, []string{"kept"}, []string{"cfg/jupyter_server_config.json"}, "hi/jupyter_server_config.py:2: the file raised ValueError: broken on purpose"},
		// An invalid jupyter_server_config.json stops jupyter_server 1.23
		// from starting at all (its extension manager re-reads it), so the
		// comparison uses jupyter_config.json, which it only skips.
		{"invalid JSON is skipped whole", map[string]string{
			"hi/jupyter_config.json": `{"MeganeBuilderTools": {"mcp_servers": {"never": {}}}`,
			"cfg/jupyter_config.py":  pyAssign("kept"),
		}, []string{"kept"}, []string{"cfg/jupyter_config.py"}, "hi/jupyter_config.json: not valid JSON: line 1, column 53"},
		{"null hides the default and other names", map[string]string{
			"cfg/jupyter_server_config.json": `{"MeganeBuilderTools": {"mcp_servers": {"megane-builder-tools": null, "x": {"command": "cmd-x"}}}}`,
		}, []string{"x"}, []string{"cfg/jupyter_server_config.json"}, ""},
		{".d fragments are ignored", map[string]string{
			"cfg/jupyter_server_config.d/megane.json": jsonAssign("fragment"),
		}, nil, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			s.vars["JUPYTER_CONFIG_DIR"] = filepath.Join(s.dir, "cfg")
			s.vars["JUPYTER_CONFIG_PATH"] = filepath.Join(s.dir, "hi")
			for p, text := range tc.files {
				s.write(p, text)
			}
			real := realServers(t, showConfig(t, py, s))
			wantReal := map[string]string{}
			for _, n := range tc.want {
				wantReal[n] = "cmd-" + n
			}
			if tc.name == "update() adds to the lower value" {
				wantReal["low1"] = "cmd-low1b"
			}
			if !reflect.DeepEqual(real, wantReal) {
				t.Fatalf("the real server has %v, the test expects %v", real, wantReal)
			}
			cfg, err := Load(context.Background(), s.opts())
			must(t, err)
			if got := ourServers(cfg); !reflect.DeepEqual(got, real) {
				t.Errorf("read %v, real Jupyter has %v\nproblems:\n%s", got, real, problemsText(cfg.Problems))
			}
			var files []string
			for _, f := range cfg.Files {
				rel, _ := filepath.Rel(s.dir, f.Path)
				files = append(files, rel)
			}
			if !reflect.DeepEqual(files, tc.wantFiles) {
				t.Errorf("Files = %q, want %q", files, tc.wantFiles)
			}
			_, hasDefault := entryByName(cfg, DefaultServerName)
			if wantDefault := !strings.Contains(tc.name, "null"); hasDefault != wantDefault {
				t.Errorf("default server present = %v, want %v", hasDefault, wantDefault)
			}
			if tc.problem != "" && !strings.Contains(problemsText(cfg.Problems), filepath.Join(s.dir, tc.problem)) {
				t.Errorf("problems do not mention %q:\n%s", tc.problem, problemsText(cfg.Problems))
			}
		})
	}
}
