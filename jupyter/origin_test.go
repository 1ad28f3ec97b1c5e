package jupyter

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// realString is the merged configuration's Section.trait as a string ("" when
// unset).
func realString(t *testing.T, cfg map[string]map[string]json.RawMessage, section, trait string) string {
	t.Helper()
	raw, ok := cfg[section][trait]
	if !ok {
		return ""
	}
	var s string
	must(t, json.Unmarshal(raw, &s))
	return s
}

// TestOriginSettingsMatchTraitlets writes Jupyter's Origin settings at
// several levels and checks that Load reports the values the real Jupyter
// server ends up with (jupyter_server 1.23 has no NotebookApp settings of
// its own: without notebook_shim it ignores them).
func TestOriginSettingsMatchTraitlets(t *testing.T) {
	py := needJupyter(t)
	tests := []struct {
		name    string
		files   map[string]string // hi/ is on JUPYTER_CONFIG_PATH, cfg/ is JUPYTER_CONFIG_DIR
		origin  string
		pat     string
		problem string // a file (relative to the sandbox) and text a problem must mention
	}{
		{"none set", map[string]string{
			"cfg/jupyter_server_config.json": `{"ServerApp": {"port_retries": 0}}`,
		}, "", "", ""},
		{"json beats py in one directory", map[string]string{
			"cfg/jupyter_server_config.py":   "c.ServerApp.allow_origin = 'http://py.example'\n",
			"cfg/jupyter_server_config.json": `{"ServerApp": {"allow_origin": "http://json.example"}}`,
		}, "http://json.example", "", ""},
		{"higher directory wins", map[string]string{
			"hi/jupyter_server_config.py":    "c.ServerApp.allow_origin = '*'\n",
			"cfg/jupyter_server_config.json": `{"ServerApp": {"allow_origin": "http://low.example", "allow_origin_pat": "https://.*\\.low\\.example"}}`,
		}, "*", `https://.*\.low\.example`, ""},
		{"jupyter_server_config beats jupyter_config at any level", map[string]string{
			"hi/jupyter_config.json":       `{"ServerApp": {"allow_origin_pat": "https://generic\\.example"}}`,
			"cfg/jupyter_server_config.py": "c.ServerApp.allow_origin_pat = r'https://server\\.example'\n",
		}, "", `https://server\.example`, ""},
		{"a .py that only reads the trait sets nothing", map[string]string{
			"hi/jupyter_server_config.py":    "_ = c.ServerApp.allow_origin\n",
			"cfg/jupyter_server_config.json": `{"ServerApp": {"allow_origin": "http://kept.example"}}`,
		}, "http://kept.example", "", ""},
		{"NotebookApp settings are ignored without notebook_shim", map[string]string{
			"cfg/jupyter_server_config.json": `{"NotebookApp": {"allow_origin": "http://nb.example"}, "ServerApp": {"allow_origin_pat": "https://sv\\.example"}}`,
		}, "", `https://sv\.example`, "cfg/jupyter_server_config.json: NotebookApp.allow_origin is ignored"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			s.vars["JUPYTER_CONFIG_DIR"] = filepath.Join(s.dir, "cfg")
			s.vars["JUPYTER_CONFIG_PATH"] = filepath.Join(s.dir, "hi")
			for p, text := range tc.files {
				s.write(p, text)
			}
			real := showConfig(t, py, s)
			realOrigin := realString(t, real, "ServerApp", "allow_origin")
			realPat := realString(t, real, "ServerApp", "allow_origin_pat")
			if realOrigin != tc.origin || realPat != tc.pat {
				t.Fatalf("the real server has allow_origin %q, allow_origin_pat %q; the test expects %q, %q", realOrigin, realPat, tc.origin, tc.pat)
			}
			cfg, err := Load(context.Background(), s.opts())
			must(t, err)
			if cfg.AllowOrigin != realOrigin || cfg.AllowOriginPat != realPat {
				t.Errorf("read allow_origin %q, allow_origin_pat %q; real Jupyter has %q, %q\nproblems:\n%s", cfg.AllowOrigin, cfg.AllowOriginPat, realOrigin, realPat, problemsText(cfg.Problems))
			}
			text := problemsText(cfg.Problems)
			if tc.problem == "" && text != "" {
				t.Errorf("unexpected problems:\n%s", text)
			}
			if tc.problem != "" && !strings.Contains(text, filepath.Join(s.dir, tc.problem)) {
				t.Errorf("problems do not mention %q:\n%s", tc.problem, text)
			}
		})
	}
}

// TestOriginSettingsNotebookShim: with notebook_shim importable by the
// server's Python, NotebookApp's Origin settings replace ServerApp's (the
// shim moves them onto ServerApp, after ServerApp's own values).
func TestOriginSettingsNotebookShim(t *testing.T) {
	needJupyter(t)
	s := newSandbox(t)
	s.vars["JUPYTER_CONFIG_DIR"] = filepath.Join(s.dir, "cfg")
	s.write("pylib/notebook_shim/__init__.py", "")
	s.vars["PYTHONPATH"] = filepath.Join(s.dir, "pylib")
	s.write("cfg/jupyter_server_config.json", `{"ServerApp": {"allow_origin": "http://server.example", "allow_origin_pat": "https://sv\\.example"}}`)
	s.write("cfg/jupyter_server_config.py", "c.NotebookApp.allow_origin = 'http://notebook.example'\n")
	cfg, err := Load(context.Background(), s.opts())
	must(t, err)
	if cfg.Python == nil || !cfg.Python.NotebookShim {
		t.Fatalf("the probe did not see notebook_shim: %+v", cfg.Python)
	}
	if cfg.AllowOrigin != "http://notebook.example" || cfg.AllowOriginPat != `https://sv\.example` {
		t.Errorf("allow_origin %q, allow_origin_pat %q; want NotebookApp's origin and ServerApp's pattern", cfg.AllowOrigin, cfg.AllowOriginPat)
	}
	if text := problemsText(cfg.Problems); text != "" {
		t.Errorf("unexpected problems:\n%s", text)
	}
}

// TestOriginSettingsProblems: values Jupyter cannot use are reported with
// their file and key and not used.
func TestOriginSettingsProblems(t *testing.T) {
	needJupyter(t)
	tests := []struct {
		name    string
		files   map[string]string
		origin  string
		problem string
	}{
		{"not a string", map[string]string{
			"cfg/jupyter_server_config.json": `{"ServerApp": {"allow_origin": ["http://a.example"]}}`,
		}, "", "ServerApp.allow_origin must be a string, found an array"},
		{"a bad value above a good one keeps the good one", map[string]string{
			"hi/jupyter_server_config.json":  `{"ServerApp": {"allow_origin": null}}`,
			"cfg/jupyter_server_config.json": `{"ServerApp": {"allow_origin": "http://good.example"}}`,
		}, "http://good.example", "ServerApp.allow_origin must be a string, found null"},
		{"container operations on a string", map[string]string{
			"cfg/jupyter_server_config.py": "c.ServerApp.allow_origin_pat.update({'a': 1})\n",
		}, "", "c.ServerApp.allow_origin_pat is a string: assign one"},
		{".py that cannot be evaluated", map[string]string{
			"cfg/jupyter_server_config.py": "c.ServerApp.allow_origin = '*'\n",
		}, "", "mentions allow_origin but cannot be evaluated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			s.vars["JUPYTER_CONFIG_DIR"] = filepath.Join(s.dir, "cfg")
			s.vars["JUPYTER_CONFIG_PATH"] = filepath.Join(s.dir, "hi")
			for p, text := range tc.files {
				s.write(p, text)
			}
			opts := s.opts()
			if strings.HasPrefix(tc.name, ".py that cannot") {
				opts.Python = "none"
			}
			cfg, err := Load(context.Background(), opts)
			must(t, err)
			if cfg.AllowOrigin != tc.origin {
				t.Errorf("allow_origin %q, want %q", cfg.AllowOrigin, tc.origin)
			}
			if text := problemsText(cfg.Problems); !strings.Contains(text, tc.problem) {
				t.Errorf("problems do not mention %q:\n%s", tc.problem, text)
			}
		})
	}
}
