package jupyter

import (
	"path/filepath"
	"strings"
)

// installedPrefix is the prefix of the Python environment a wheel
// installed bin into (bin is then
// <prefix>\Lib\site-packages\megane_jupyter_bridge\bin\megane-jupyter-bridge.exe),
// or "" when bin is not such a file (go install, go build).
func installedPrefix(bin string) string {
	binDir := filepath.Dir(bin)
	pkg := filepath.Dir(binDir)
	site := filepath.Dir(pkg)
	lib := filepath.Dir(site)
	if !strings.EqualFold(filepath.Base(binDir), "bin") || !strings.EqualFold(filepath.Base(pkg), "megane_jupyter_bridge") ||
		!strings.EqualFold(filepath.Base(site), "site-packages") || !strings.EqualFold(filepath.Base(lib), "Lib") {
		return ""
	}
	return filepath.Dir(lib)
}

// envInterpreters are where a Python environment at prefix keeps its
// interpreter: Scripts\ in a venv, the prefix itself in a base
// installation or a conda environment.
func envInterpreters(prefix string) []string {
	return []string{filepath.Join(prefix, "Scripts", "python.exe"), filepath.Join(prefix, "python.exe")}
}

// envScript is where an environment at prefix keeps its console script
// name (a venv's Scripts\, name.exe).
func envScript(prefix, name string) string {
	return filepath.Join(prefix, "Scripts", name+".exe")
}
