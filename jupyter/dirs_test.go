package jupyter

import (
	"path/filepath"
	"testing"
)

// TestDataDir: Jupyter's data and runtime directories as jupyter_core
// finds them on this system (dataDirCases, per OS), JUPYTER_DATA_DIR and
// JUPYTER_RUNTIME_DIR first everywhere.
func TestDataDir(t *testing.T) {
	home := filepath.FromSlash("/home/ada")
	cases := append([]dataDirCase{
		{"JUPYTER_DATA_DIR", map[string]string{"JUPYTER_DATA_DIR": filepath.FromSlash("/d"), "XDG_DATA_HOME": "/x", "APPDATA": "/a"},
			filepath.FromSlash("/d"), filepath.FromSlash("/d/runtime")},
		{"JUPYTER_RUNTIME_DIR", map[string]string{"JUPYTER_DATA_DIR": filepath.FromSlash("/d"), "JUPYTER_RUNTIME_DIR": filepath.FromSlash("/r")},
			filepath.FromSlash("/d"), filepath.FromSlash("/r")},
	}, dataDirCases(home)...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string { return tc.env[k] }
			if got := dataDir(getenv, home); got != tc.data {
				t.Errorf("data dir %q, want %q", got, tc.data)
			}
			if got := runtimeDir(getenv, home); got != tc.runtime {
				t.Errorf("runtime dir %q, want %q", got, tc.runtime)
			}
		})
	}
}

type dataDirCase struct {
	name          string
	env           map[string]string
	data, runtime string
}
