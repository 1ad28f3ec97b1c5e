package jupyter

import "path/filepath"

// platformDataDir is jupyter_core's data directory on macOS:
// ~/Library/Jupyter.
func platformDataDir(_ func(string) string, home string) string {
	return filepath.Join(home, "Library", "Jupyter")
}

// systemConfigPath is jupyter_core's SYSTEM_CONFIG_PATH on macOS.
func systemConfigPath(map[string]string) []string {
	return []string{"/usr/local/etc/jupyter", "/etc/jupyter"}
}

// homeOf is the home directory of the environment getenv reads: HOME.
func homeOf(getenv func(string) string) (string, error) { return unixHome(getenv) }
