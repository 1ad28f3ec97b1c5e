package jupyter

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
)

// TestConfigPathMatchesJupyter compares the config search path with what
// the real jupyter_core prints under varied JUPYTER_* variables.
func TestConfigPathMatchesJupyter(t *testing.T) {
	py := needJupyter(t)
	tests := []struct {
		name string
		set  func(s *sandbox)
	}{
		{"defaults", func(s *sandbox) {}},
		{"JUPYTER_CONFIG_DIR", func(s *sandbox) { s.vars["JUPYTER_CONFIG_DIR"] = filepath.Join(s.dir, "cfgdir") }},
		{"JUPYTER_CONFIG_PATH", func(s *sandbox) {
			s.vars["JUPYTER_CONFIG_PATH"] = filepath.Join(s.dir, "a") + ":" + filepath.Join(s.home, "b") + "/"
		}},
		{"JUPYTER_PREFER_ENV_PATH=1", func(s *sandbox) { s.vars["JUPYTER_PREFER_ENV_PATH"] = "1" }},
		{"JUPYTER_PREFER_ENV_PATH=off", func(s *sandbox) { s.vars["JUPYTER_PREFER_ENV_PATH"] = "off" }},
		{"PYTHONUSERBASE", func(s *sandbox) { s.vars["PYTHONUSERBASE"] = filepath.Join(s.dir, "ub") }},
		{"PYTHONNOUSERSITE", func(s *sandbox) { s.vars["PYTHONNOUSERSITE"] = "1" }},
		{"all together", func(s *sandbox) {
			s.vars["JUPYTER_CONFIG_DIR"] = filepath.Join(s.dir, "cfgdir")
			s.vars["JUPYTER_CONFIG_PATH"] = filepath.Join(s.dir, "x")
			s.vars["JUPYTER_PREFER_ENV_PATH"] = "yes"
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			jupytertest.Launcher(t, s.bin, py) // as jupyter --paths runs: the Python found is the launcher's
			tc.set(s)
			cmd := exec.Command(py, "-m", "jupyter", "--paths", "--json")
			cmd.Env = s.environ()
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("jupyter --paths: %v", err)
			}
			var want struct {
				Config []string `json:"config"`
			}
			must(t, json.Unmarshal(out, &want))
			cfg, err := Load(context.Background(), s.opts())
			must(t, err)
			if !reflect.DeepEqual(cfg.ConfigPath, want.Config) {
				t.Errorf("config path\n got  %q\n want %q", cfg.ConfigPath, want.Config)
			}
			if cfg.Python == nil || cfg.Python.Path != py {
				t.Errorf("python = %+v, want %s (the jupyter script's interpreter, not the first python3 on PATH)", cfg.Python, py)
			}
		})
	}
}

// TestConfigPathWithoutPython: with no Python the path still has the user
// and system levels, and SysPrefix supplies the env level.
func TestConfigPathWithoutPython(t *testing.T) {
	s := newSandbox(t)
	o := s.opts()
	o.Python = "none"
	cfg, err := Load(context.Background(), o)
	must(t, err)
	want := []string{filepath.Join(s.home, ".jupyter"), filepath.Join(s.home, ".local/etc/jupyter"), "/usr/local/etc/jupyter", "/etc/jupyter"}
	if !reflect.DeepEqual(cfg.ConfigPath, want) {
		t.Errorf("got %q want %q", cfg.ConfigPath, want)
	}
	o.SysPrefix = "/opt/conda"
	cfg, err = Load(context.Background(), o)
	must(t, err)
	want = []string{filepath.Join(s.home, ".jupyter"), filepath.Join(s.home, ".local/etc/jupyter"), "/opt/conda/etc/jupyter", "/usr/local/etc/jupyter", "/etc/jupyter"}
	if !reflect.DeepEqual(cfg.ConfigPath, want) {
		t.Errorf("got %q want %q", cfg.ConfigPath, want)
	}
}
