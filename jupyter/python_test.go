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
		check(t, find(t, opts), debianPython, "/usr", "python3 on PATH")
	})
	t.Run("parent Python without jupyter_server", func(t *testing.T) {
		bare := newVenv(t, s.dir, "bare", false)
		pid := startProcess(t, bare, append([]string{bare}, sleep...), s.environ())
		opts := s.opts()
		opts.ParentPID = pid
		check(t, find(t, opts), debianPython, "/usr", "python3 on PATH")
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
