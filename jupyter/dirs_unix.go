//go:build unix && !darwin

package jupyter

import "path/filepath"

// platformDataDir is jupyter_core's data directory on Linux (and other
// Unix but macOS): ${XDG_DATA_HOME:-~/.local/share}/jupyter.
func platformDataDir(getenv func(string) string, home string) string {
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "jupyter")
	}
	return filepath.Join(home, ".local", "share", "jupyter")
}

// systemConfigPath is jupyter_core's SYSTEM_CONFIG_PATH on Unix.
func systemConfigPath(map[string]string) []string {
	return []string{"/usr/local/etc/jupyter", "/etc/jupyter"}
}

// homeOf is the home directory of the environment getenv reads: HOME.
func homeOf(getenv func(string) string) (string, error) { return unixHome(getenv) }
