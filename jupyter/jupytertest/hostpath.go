package jupytertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// HostPath returns a PATH of one new directory that holds links to the
// named programs of this machine (the system's: /usr/bin, /bin, and only
// then the test's PATH, where a pyenv shim may come first) and nothing
// else. A test that means "python3 on PATH
// and no jupyter launcher" says exactly that with HostPath(t, "python3"),
// whatever the machine has installed: Debian's /usr/bin/jupyter (which
// jupyter-core puts there with apt's recommends), a pyenv shim, a conda
// environment. A program that is not on the machine fails the test.
func HostPath(t testing.TB, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	dir, _ = filepath.EvalSymlinks(dir)
	for _, n := range names {
		var p string
		for _, d := range []string{"/usr/bin", "/bin"} {
			if fi, err := os.Stat(filepath.Join(d, n)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				p = filepath.Join(d, n)
				break
			}
		}
		var err error
		if p == "" {
			p, err = exec.LookPath(n)
		}
		if err != nil {
			t.Fatalf("HostPath: %s is not on this machine: %v", n, err)
		}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if err := os.Symlink(p, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Launcher writes dir/jupyter, a jupyter command whose #! line names
// python, as pip and Debian write them, and returns its path.
func Launcher(t testing.TB, dir, python string) string {
	t.Helper()
	p := filepath.Join(dir, "jupyter")
	script := "#!" + python + "\nimport sys\nfrom jupyter_core.command import main\nsys.exit(main())\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
