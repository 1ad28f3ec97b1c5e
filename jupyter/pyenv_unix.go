//go:build unix

package jupyter

import (
	"path/filepath"
	"strings"
)

// installedPrefix is the prefix of the Python environment a wheel
// installed bin into (bin is then
// <prefix>/lib/pythonX.Y/site-packages/megane_jupyter_bridge/bin/megane-jupyter-bridge),
// or "" when bin is not such a file (go install, make build).
func installedPrefix(bin string) string {
	binDir := filepath.Dir(bin)
	pkg := filepath.Dir(binDir)
	site := filepath.Dir(pkg)
	pyDir := filepath.Dir(site)
	if filepath.Base(binDir) != "bin" || filepath.Base(pkg) != "megane_jupyter_bridge" ||
		(filepath.Base(site) != "site-packages" && filepath.Base(site) != "dist-packages") ||
		!strings.HasPrefix(filepath.Base(pyDir), "python") || filepath.Base(filepath.Dir(pyDir)) != "lib" {
		return ""
	}
	return filepath.Dir(filepath.Dir(pyDir))
}

// envInterpreters are where a Python environment at prefix (a venv, a
// conda environment, a base installation) keeps its interpreter.
func envInterpreters(prefix string) []string {
	return []string{filepath.Join(prefix, "bin", "python3"), filepath.Join(prefix, "bin", "python")}
}

// envScript is where an environment at prefix keeps its console script
// name (pip's and uv's bin/).
func envScript(prefix, name string) string {
	return filepath.Join(prefix, "bin", name)
}
