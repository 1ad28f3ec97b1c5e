package jupyter

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
)

// newVenv creates a venv (without pip) at dir/name from Debian's Python and
// returns its bin/python3. With systemSite it sees Debian's jupyter_server
// and traitlets; without, it imports neither.
func newVenv(t *testing.T, dir, name string, systemSite bool) string {
	t.Helper()
	venv := filepath.Join(dir, name)
	args := []string{"-m", "venv", "--without-pip", venv}
	if systemSite {
		args = append(args, "--system-site-packages")
	}
	if out, err := exec.Command(debianPython, args...).CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv: %v: %s", err, out)
	}
	return filepath.Join(venv, "bin", "python3")
}

// startProcess runs path with argv (argv[0] as given, not necessarily
// path) and environment env until the test ends, and returns its pid once
// it runs path (so /proc shows the program, not this test binary).
func startProcess(t *testing.T, path string, argv, env []string) int {
	t.Helper()
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Dir: t.TempDir()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	want, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	// Right after exec, /proc/<pid>/cmdline can read empty for a moment
	// (measured here: one start in five): wait for both, as a real parent
	// Jupyter server has long been running when the bridge looks at it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		exe, _ := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/exe")
		if argv, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cmdline"); exe == want && len(argv) > 0 {
			return cmd.Process.Pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFindPythonParentProcess: the process that started the bridge (the
// Jupyter server, under jupyter-server-proxy) is asked first, as that
// process named its interpreter: a venv's bin/python3 gives the venv's
// sys.prefix, which the binary it links to (/proc/<pid>/exe) would not.
// --python still wins, and a parent that is no Jupyter Python is passed
// over for the usual search.
func TestFindPythonParentProcess(t *testing.T) {
	needJupyter(t)
	s := newSandbox(t)
	venvPy := newVenv(t, s.dir, "venv", true)
	venv := filepath.Dir(filepath.Dir(venvPy))
	sleep := []string{"-c", "import time; time.sleep(600)"}
	ctx := context.Background()

	find := func(t *testing.T, opts Options) *Python {
		t.Helper()
		py, err := FindPython(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		return py
	}
	check := func(t *testing.T, py *Python, path, prefix, source string) {
		t.Helper()
		if py.Path != path || py.Prefix != prefix || py.Source != source {
			t.Errorf("got %s (sys.prefix %s, found by %s), want %s (sys.prefix %s, found by %s)", py.Path, py.Prefix, py.Source, path, prefix, source)
		}
	}

	t.Run("venv parent started by path, before python3 on PATH", func(t *testing.T) {
		pid := startProcess(t, venvPy, append([]string{venvPy}, sleep...), s.environ())
		opts := s.opts()
		opts.ParentPID = pid
		check(t, find(t, opts), venvPy, venv, "the parent process (pid "+strconv.Itoa(pid)+")")
	})
	t.Run("venv parent started by name from its own PATH", func(t *testing.T) {
		pid := startProcess(t, venvPy, append([]string{"python3"}, sleep...), []string{"PATH=" + filepath.Dir(venvPy)})
		opts := s.opts() // the bridge's PATH has only /usr/bin's python3
		opts.ParentPID = pid
		check(t, find(t, opts), venvPy, venv, "the parent process (pid "+strconv.Itoa(pid)+")")
	})
	t.Run("--python wins over the parent", func(t *testing.T) {
		pid := startProcess(t, venvPy, append([]string{venvPy}, sleep...), s.environ())
		opts := s.opts()
		opts.ParentPID, opts.Python = pid, debianPython
		check(t, find(t, opts), debianPython, "/usr", "--python")
	})
	t.Run("parent that is not a Python", func(t *testing.T) {
		pid := startProcess(t, "/bin/sleep", []string{"sleep", "600"}, s.environ())
		opts := s.opts()
		opts.ParentPID = pid
		check(t, find(t, opts), s.hostPython(), "/usr", "python3 on PATH")
	})
	t.Run("parent Python without jupyter_server", func(t *testing.T) {
		bare := newVenv(t, s.dir, "bare", false)
		pid := startProcess(t, bare, append([]string{bare}, sleep...), s.environ())
		opts := s.opts()
		opts.ParentPID = pid
		check(t, find(t, opts), s.hostPython(), "/usr", "python3 on PATH")
	})
	t.Run("nothing found names the parent", func(t *testing.T) {
		pid := startProcess(t, "/bin/sleep", []string{"sleep", "600"}, s.environ())
		opts := s.opts()
		opts.ParentPID = pid
		opts.Environ = []string{"PATH=" + s.bin, "HOME=" + s.home}
		_, err := FindPython(ctx, opts)
		if err == nil || !strings.Contains(err.Error(), "the parent process "+strconv.Itoa(pid)+" (it runs ") || !strings.Contains(err.Error(), "not a Python)") {
			t.Errorf("want an error naming the parent process and why it was passed over, got %v", err)
		}
	})
}

// TestProcessPython is doctor's view of a running server's interpreter.
func TestProcessPython(t *testing.T) {
	needJupyter(t)
	s := newSandbox(t)
	venvPy := newVenv(t, s.dir, "venv", true)
	pid := startProcess(t, venvPy, []string{venvPy, "-c", "import time; time.sleep(600)"}, s.environ())
	py, err := ProcessPython(context.Background(), s.opts(), pid)
	if err != nil {
		t.Fatal(err)
	}
	if py.Path != venvPy || py.Prefix != filepath.Dir(filepath.Dir(venvPy)) || py.JupyterServer == "" {
		t.Errorf("got %+v", py)
	}
	sh := startProcess(t, "/bin/sleep", []string{"sleep", "600"}, s.environ())
	if _, err := ProcessPython(context.Background(), s.opts(), sh); err == nil || !strings.Contains(err.Error(), "not a Python") {
		t.Errorf("sleep: %v", err)
	}
}

// TestFindPythonOrder: the order CONFIG.md gives ("Which Python reads the
// configuration"), one row per rule, each on a PATH the test makes itself
// (jupytertest.HostPath), so what the machine has installed never decides
// the outcome: Debian's /usr/bin/jupyter, a pyenv shim, a conda env.
func TestFindPythonOrder(t *testing.T) {
	needJupyter(t)
	s := newSandbox(t)
	venvPy := newVenv(t, s.dir, "venv", true) // --system-site-packages: imports Debian's jupyter_server
	venv := filepath.Dir(filepath.Dir(venvPy))
	bare := newVenv(t, s.dir, "bare", false) // imports no traitlets
	// A system-wide launcher, as jupyter-core's package installs in
	// /usr/bin: its #! line names Debian's Python.
	sysBin := filepath.Join(s.dir, "sysbin")
	must(t, os.MkdirAll(sysBin, 0o755))
	sysLauncher := jupytertest.Launcher(t, sysBin, debianPython)
	// A venv's own launcher, as pip writes it.
	ownBin := filepath.Join(s.dir, "ownbin")
	must(t, os.MkdirAll(ownBin, 0o755))
	ownLauncher := jupytertest.Launcher(t, ownBin, venvPy)
	venvBin := filepath.Dir(venvPy)
	// The bridge's binary as a wheel installs it into an environment's
	// site-packages (what the console script runs).
	installed := func(py string) string {
		libs, _ := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(py)), "lib", "python3*"))
		if len(libs) != 1 {
			t.Fatalf("no lib/python3* beside %s", py)
		}
		bin := filepath.Join(libs[0], "site-packages", "megane_jupyter_bridge", "bin", "megane-jupyter-bridge")
		must(t, os.MkdirAll(filepath.Dir(bin), 0o755))
		must(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755))
		return bin
	}
	inVenv, inBare := installed(venvPy), installed(bare)
	bareVenv := filepath.Dir(filepath.Dir(bare))

	for _, tc := range []struct {
		name             string
		python           string // --python
		self, virtualEnv string // Options.Self, VIRTUAL_ENV
		path             []string
		want, prefix     string
		source           string
	}{
		{"the environment a wheel installed the bridge into, before the system launcher (the console script's own Python)",
			"", inVenv, "", []string{venvBin, sysBin, s.hostBin}, venvPy, venv, "the Python environment the bridge is installed in (" + venv + ")"},
		{"the active virtual environment, before the system launcher",
			"", "", venv, []string{venvBin, sysBin, s.hostBin}, venvPy, venv, "the active virtual environment (VIRTUAL_ENV=" + venv + ")"},
		{"an environment that cannot import jupyter_server is passed over",
			"", inBare, bareVenv, []string{sysBin, s.hostBin}, debianPython, "/usr", "the #! line of " + sysLauncher},
		{"--python first", venvPy, inBare, "", []string{sysBin, s.hostBin}, venvPy, venv, "--python"},
		{"a jupyter launcher's #! line before python3 on PATH", "", "", "", []string{s.hostBin, ownBin}, venvPy, venv, "the #! line of " + ownLauncher},
		{"python3 on PATH when there is no launcher", "", "", "", []string{s.hostBin}, s.hostPython(), "/usr", "python3 on PATH"},
		{"a venv's bin first on PATH, not activated, with no launcher of its own: the system launcher is what `jupyter` runs",
			"", "", "", []string{venvBin, sysBin, s.hostBin}, debianPython, "/usr", "the #! line of " + sysLauncher},
		{"a venv's bin first on PATH with no launcher and none elsewhere: its python3",
			"", "", "", []string{venvBin, s.hostBin}, venvPy, venv, "python3 on PATH"},
		{"a python3 that cannot import traitlets is passed over", "", "", "", []string{filepath.Dir(bare), s.hostBin}, s.hostPython(), "/usr", "python3 on PATH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := s.opts()
			opts.Python = tc.python
			opts.Self = tc.self
			env := []string{"PATH=" + strings.Join(tc.path, ":")}
			if tc.virtualEnv != "" {
				env = append(env, "VIRTUAL_ENV="+tc.virtualEnv)
			}
			for _, kv := range opts.Environ {
				if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "VIRTUAL_ENV=") {
					env = append(env, kv)
				}
			}
			opts.Environ = env
			py, err := FindPython(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if py.Path != tc.want || py.Prefix != tc.prefix || py.Source != tc.source {
				t.Errorf("got %s (sys.prefix %s, found by %s), want %s (sys.prefix %s, found by %s)", py.Path, py.Prefix, py.Source, tc.want, tc.prefix, tc.source)
			}
		})
	}
}
