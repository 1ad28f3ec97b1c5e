package jupyter

import (
	"os"
	"path/filepath"
)

// platformDataDir is jupyter_core's data directory on Windows:
// %APPDATA%\jupyter, else {config dir}\data.
func platformDataDir(getenv func(string) string, home string) string {
	if a := getenv("APPDATA"); a != "" {
		return filepath.Join(a, "jupyter")
	}
	if c := getenv("JUPYTER_CONFIG_DIR"); c != "" {
		return filepath.Join(c, "data")
	}
	return filepath.Join(home, ".jupyter", "data")
}

// systemConfigPath is jupyter_core's SYSTEM_CONFIG_PATH on Windows:
// %PROGRAMDATA%\jupyter. vars is the environment in question; nil reads
// the bridge's own.
func systemConfigPath(vars map[string]string) []string {
	pd := vars["PROGRAMDATA"]
	if vars == nil {
		pd = os.Getenv("PROGRAMDATA")
	}
	if pd == "" {
		return nil
	}
	return []string{filepath.Join(pd, "jupyter")}
}

// homeOf is the home directory of the environment getenv reads:
// USERPROFILE, else the bridge's own.
func homeOf(getenv func(string) string) (string, error) {
	if h := getenv("USERPROFILE"); h != "" {
		return h, nil
	}
	return os.UserHomeDir()
}
