package main

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
)

// standInWheel writes a wheel of a package named megane-builder-tools whose
// console script of that name runs bridge's demo tool server (bridge
// demo-tools, MCP on stdin/stdout): what the real reference server is to
// prefetch-default, which can be had neither from PyPI nor from GitHub here.
func standInWheel(t *testing.T, dir, bridge string) string {
	t.Helper()
	files := []struct{ name, data string }{
		{"megane_builder_tools/__init__.py", "import os\n\n\ndef main():\n    os.execv(" + fmt.Sprintf("%q", bridge) + ", [" + fmt.Sprintf("%q", bridge) + ", \"demo-tools\"])\n"},
		{"megane_builder_tools-0.0.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: megane-builder-tools\nVersion: 0.0.0\n"},
		{"megane_builder_tools-0.0.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: standin\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{"megane_builder_tools-0.0.0.dist-info/entry_points.txt", "[console_scripts]\nmegane-builder-tools = megane_builder_tools:main\n"},
	}
	p := filepath.Join(dir, "megane_builder_tools-0.0.0-py3-none-any.whl")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	var record strings.Builder
	for _, file := range files {
		w, _ := zw.Create(file.name)
		w.Write([]byte(file.data))
		sum := sha256.Sum256([]byte(file.data))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", file.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(file.data))
	}
	record.WriteString("megane_builder_tools-0.0.0.dist-info/RECORD,,\n")
	w, _ := zw.Create("megane_builder_tools-0.0.0.dist-info/RECORD")
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

// TestPrefetchDefault: prefetch-default installs the reference server (a
// stand-in package of the same name, from a wheel file, with pip
// --no-index: no network) into an environment of its own in Jupyter's
// data directory; the default entry then finds it there, with no warning
// about a first start that needs the network, and it starts and passes
// check with no network and no uv.
func TestPrefetchDefault(t *testing.T) {
	if err := exec.Command("python3", "-c", "import venv, ensurepip").Run(); err != nil {
		jupytertest.Need(t, "python3-venv", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	home, data := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("JUPYTER_DATA_DIR", data)
	t.Setenv("JUPYTER_CONFIG_DIR", filepath.Join(home, ".jupyter"))
	t.Setenv("JUPYTER_CONFIG_PATH", "")
	t.Setenv("PATH", jupytertest.HostPath(t, "python3")) // python3, and no uv, no megane-builder-tools
	t.Setenv(asProgramEnv, "1")                          // the stand-in runs this binary as the bridge
	wheel := standInWheel(t, t.TempDir(), exe)

	out, errOut, err := runCLI(t, "prefetch-default", "--from", wheel, "--", "--no-index")
	want := filepath.Join(data, "megane-jupyter-bridge", "megane-builder-tools")
	if err != nil || !strings.Contains(out, "prefetch-default: megane-builder-tools is installed in "+want+"; it starts with no network") {
		t.Fatalf("prefetch-default: %v\n%s\n%s", err, out, errOut)
	}
	out, _, err = runCLI(t, "servers", "--python", "none")
	if err != nil || !strings.Contains(out, jupyter.PrefetchedCommand(want)) || strings.Contains(out, "uvx") {
		t.Fatalf("servers after prefetch-default: %v; want the default entry to run %s, not uvx:\n%s", err, jupyter.PrefetchedCommand(want), out)
	}
	out, _, err = runCLI(t, "check", jupyter.DefaultServerName, "--python", "none", "--timeout", "1m")
	if err != nil || !strings.Contains(out, "ok: gas_box: keeps the contract") {
		t.Fatalf("check %s, offline, after prefetch-default: %v\n%s", jupyter.DefaultServerName, err, out)
	}
}
