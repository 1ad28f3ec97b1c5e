package jupyter

import (
	"crypto/sha256"
	"encoding/hex"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(bridgetest.PeakReport{M: m, Pkg: "jupyter"})
}

// debianPython is the Python of Debian's python3-jupyter-server.
const debianPython = "/usr/bin/python3"

// needJupyter returns the Python of a real Jupyter server. Under CI=true
// a missing one fails the test; otherwise the test is skipped.
func needJupyter(t *testing.T) string {
	t.Helper()
	if err := exec.Command(debianPython, "-c", "import jupyter_server, jupyter_core, traitlets").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the real Jupyter server is required (apt-get install python3-jupyter-server): %v", err)
		}
		t.Skipf("skipping: %s cannot import jupyter_server (apt-get install python3-jupyter-server): %v", debianPython, err)
	}
	return debianPython
}

// sandbox is a temporary home with controlled environment variables.
type sandbox struct {
	t    *testing.T
	dir  string
	home string
	root string
	bin  string // first on PATH; tests put fake commands here
	// hostBin is on PATH after bin: links to the host's python3 and
	// nothing else (jupytertest.HostPath), so no test sees the host's
	// /usr/bin/jupyter, a pyenv shim or a conda environment.
	hostBin string
	vars    map[string]string
}

// hostPython is python3 as the sandbox's PATH finds it.
func (s *sandbox) hostPython() string { return filepath.Join(s.hostBin, "python3") }

func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	dir := t.TempDir()
	// Resolve symlinks so paths compare equal to what Python prints.
	dir, _ = filepath.EvalSymlinks(dir)
	s := &sandbox{t: t, dir: dir, home: filepath.Join(dir, "home"), root: filepath.Join(dir, "root"), bin: filepath.Join(dir, "bin"),
		hostBin: jupytertest.HostPath(t, "python3")}
	for _, d := range []string{s.home, s.root, s.bin} {
		must(t, os.MkdirAll(d, 0o755))
	}
	s.vars = map[string]string{
		"HOME":                s.home,
		"PATH":                s.bin + ":" + s.hostBin,
		"JUPYTER_RUNTIME_DIR": filepath.Join(dir, "runtime"),
		"LANG":                "C.UTF-8",
	}
	return s
}

func (s *sandbox) environ() []string {
	var out []string
	for k, v := range s.vars {
		out = append(out, k+"="+v)
	}
	return out
}

func (s *sandbox) opts() Options {
	return Options{Environ: s.environ(), RootDir: s.root}
}

// write creates path (relative paths are inside the sandbox) with text.
func (s *sandbox) write(path, text string) string {
	s.t.Helper()
	if !filepath.IsAbs(path) {
		path = filepath.Join(s.dir, path)
	}
	must(s.t, os.MkdirAll(filepath.Dir(path), 0o755))
	must(s.t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

// exe creates an executable shell script in the sandbox's bin directory.
func (s *sandbox) exe(name string) string {
	p := filepath.Join(s.bin, name)
	must(s.t, os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o755))
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func problemsText(ps []bridge.Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Message)
		b.WriteByte('\n')
	}
	return b.String()
}

func entryByName(cfg *Config, name string) (bridge.ServerSpec, bool) {
	for _, e := range cfg.Servers {
		if e.Name == name {
			return e, true
		}
	}
	return bridge.ServerSpec{}, false
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
