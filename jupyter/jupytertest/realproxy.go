package jupytertest

// The real jupyter-server-proxy 4.4.0 (with simpervisor 1.0.0), from
// ../shared/vendor beside the repository: unmodified upstream packages that
// no registry reachable here carries. They are test components: they are
// copied into a test's directory at test time, never into the project.

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// VendorDir is ../shared/vendor beside the repository ($MEGANE_VENDOR if set).
func VendorDir(t testing.TB) string {
	t.Helper()
	if v := os.Getenv("MEGANE_VENDOR"); v != "" {
		return v
	}
	_, here, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the repository")
	}
	return filepath.Join(filepath.Dir(here), "..", "..", "..", "shared", "vendor")
}

// realProxyPackages are the import packages RealServerProxy copies, by
// folder in VendorDir.
var realProxyPackages = [][2]string{
	{"jupyter-server-proxy-4.4.0", "jupyter_server_proxy"},
	{"simpervisor-1.0.0", "simpervisor"},
}

// RealServerProxy makes the real jupyter-server-proxy run in the Jupyter
// servers of a test: it checks that root's Python ("" is the host) can
// run it (jupyter_server >= 1.24, aiohttp), copies jupyter_server_proxy and
// simpervisor from VendorDir into pylib (a directory on the servers'
// PYTHONPATH), and writes into each of configDirs the
// jupyter_server_config.d fragment pip would install, which enables it.
// A missing component fails the test under CI and skips it otherwise
// (Need).
func RealServerProxy(t testing.TB, root, pylib string, configDirs ...string) {
	t.Helper()
	check := []string{Python, "-c", `import aiohttp, jupyter_server
v = tuple(int(x) for x in jupyter_server.__version__.split(".")[:2])
assert v >= (1, 24), "jupyter_server %s is older than 1.24, which jupyter-server-proxy 4 needs" % jupyter_server.__version__`}
	if root != "" {
		check = append([]string{"chroot", root}, check...)
	}
	if out, err := exec.Command(check[0], check[1:]...).CombinedOutput(); err != nil {
		Need(t, "python3-aiohttp and jupyter_server >= 1.24 (.ci/trixie-chroot.sh) for the real jupyter-server-proxy", &cmdError{err, strings.TrimSpace(string(out))})
	}
	vendor := VendorDir(t)
	for _, p := range realProxyPackages {
		src := filepath.Join(vendor, p[0], p[1])
		if _, err := os.Stat(filepath.Join(src, "__init__.py")); err != nil {
			Need(t, "the real "+p[0]+" in ../shared/vendor", err)
		}
		if err := copyTree(src, filepath.Join(pylib, p[1])); err != nil {
			t.Fatal(err)
		}
	}
	enable := `{"ServerApp": {"jpserver_extensions": {"jupyter_server_proxy": true}}}`
	for _, dir := range configDirs {
		frag := filepath.Join(dir, "jupyter_server_config.d")
		if err := os.MkdirAll(frag, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(frag, "jupyter-server-proxy.json"), []byte(enable), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type cmdError struct {
	err error
	out string
}

func (e *cmdError) Error() string { return e.err.Error() + ": " + e.out }

// copyTree copies the regular files under src to dst (readable by every
// user: the servers may run as another one), leaving out __pycache__.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			if d.Name() == "__pycache__" {
				return filepath.SkipDir
			}
			return os.MkdirAll(to, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}
