package jupyter

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/child"
)

// Options says where to look for configuration. Every field is optional.
type Options struct {
	// Environ is the environment the Jupyter server runs with, as
	// "NAME=value" strings: JUPYTER_* variables, HOME, PATH (for commands,
	// uvx and the Python), PYTHONUSERBASE. If nil, os.Environ().
	Environ []string

	// Home is the user's home directory (${userHome}, ~/.jupyter,
	// ~/.local/bin). If empty, HOME from Environ, else os.UserHomeDir.
	Home string

	// RootDir is the Jupyter server's root_dir: ${workspaceFolder}, the
	// base of relative cwd values and of UserFile.Relative. If empty, the
	// working directory.
	RootDir string

	// Python is the interpreter of the Jupyter server, used to evaluate .py
	// configuration files and to learn sys.prefix. If empty it is searched
	// for (see FindPython). The value "none" disables Python entirely.
	Python string

	// ParentPID is the process that started this one when that may be the
	// Jupyter server itself (serve under jupyter-server-proxy). When set
	// and Python is empty, FindPython tries that process's interpreter
	// first. Zero: no process is looked at.
	ParentPID int

	// SysPrefix is the Jupyter server's sys.prefix (the env level of the
	// config path is {SysPrefix}/etc/jupyter). If empty, the Python is
	// asked; with no usable Python the env level is left out.
	SysPrefix string

	// PythonTimeout bounds each run of the Python. If zero, 30s.
	PythonTimeout time.Duration

	// Self is the running bridge's own binary: a server whose command is
	// "megane-jupyter-bridge" (as etc/demo-servers.json's demo server is)
	// runs it, whatever PATH holds. If empty, that name is looked up on
	// PATH like any other.
	Self string

	// Logger receives debug records about what was read. Nil discards.
	Logger *slog.Logger
}

// env is a resolved view of Options.
type env struct {
	vars    map[string]string
	environ []string
	home    string // as given (for ${userHome} and ~/.local/bin)
	root    string // absolute
	self    string // Options.Self
	log     *slog.Logger
}

func (o Options) resolve() env {
	e := env{environ: o.Environ, self: o.Self}
	if e.environ == nil {
		e.environ = os.Environ()
	}
	e.vars = make(map[string]string, len(e.environ))
	for _, kv := range e.environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			e.vars[child.EnvKey(k)] = v // looked up by upper-case names, as Windows compares them
		}
	}
	e.home = o.Home
	if e.home == "" {
		e.home = e.vars["HOME"]
	}
	if e.home == "" {
		e.home, _ = os.UserHomeDir()
	}
	e.root = o.RootDir
	if e.root == "" {
		e.root, _ = os.Getwd()
	}
	if abs, err := filepath.Abs(e.root); err == nil {
		e.root = abs
	}
	e.log = o.Logger
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	return e
}

func (o Options) pythonTimeout() time.Duration {
	if o.PythonTimeout > 0 {
		return o.PythonTimeout
	}
	return 30 * time.Second
}

// lookPath finds an executable named file in the PATH of e (not of this
// process), by child.LookPath's rule (empty and relative PATH entries are
// ignored). A name that is a path is checked as it is.
func (e env) lookPath(file string) (string, bool) {
	p, err := child.LookPath(file, e.vars["PATH"], "")
	return p, err == nil
}

// lookPathAll is lookPath returning every match in PATH order.
func (e env) lookPathAll(file string) []string {
	return child.LookPathAll(file, e.vars["PATH"])
}

// executableAt is p, as the system would run it (on Windows with the
// extension PATHEXT adds), if it is an executable file.
func executableAt(p string) (string, bool) {
	found, err := child.LookPath(p, "", "")
	return found, err == nil
}

// envTrue is jupyter_core's envset: set to anything but no, n, false, off,
// 0 or 0.0 (case-insensitive).
func envTrue(vars map[string]string, name string) bool {
	v, ok := vars[name]
	if !ok {
		return false
	}
	switch strings.ToLower(v) {
	case "no", "n", "false", "off", "0", "0.0":
		return false
	}
	return true
}
