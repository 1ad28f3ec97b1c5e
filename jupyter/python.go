package jupyter

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/child"
)

//go:embed pyscripts/probe.py
var probeScript string

//go:embed pyscripts/evalpy.py
var evalScript string

// Python is the interpreter of the Jupyter server, as found by FindPython,
// with the facts jupyter_core takes from it.
type Python struct {
	Path           string `json:"path"`       // the interpreter that was run
	Executable     string `json:"executable"` // its sys.executable
	Prefix         string `json:"prefix"`     // sys.prefix
	BasePrefix     string `json:"base_prefix"`
	EnableUserSite bool   `json:"enable_user_site"` // site.ENABLE_USER_SITE
	UserBase       string `json:"userbase"`         // site.getuserbase()
	Traitlets      string `json:"traitlets"`        // version; "" when not importable
	JupyterCore    string `json:"jupyter_core"`
	JupyterServer  string `json:"jupyter_server"`
	ServerProxy    bool   `json:"server_proxy"`  // jupyter_server_proxy is importable
	NotebookShim   bool   `json:"notebook_shim"` // notebook_shim is importable (it moves NotebookApp settings onto ServerApp)
	EnvAuto        bool   `json:"env_auto"`      // jupyter_core ≥ 5 would prefer the env level
	// ExternallyManaged: its pip refuses to install (PEP 668: a
	// distribution's Python, not a venv made over it).
	ExternallyManaged bool `json:"externally_managed"`
	// Source says why this interpreter was taken, for logs and doctor:
	// "--python", "the parent process (pid N)", "the #! line of PATH" or
	// "python3 on PATH".
	Source string `json:"source"`
}

// FindPython finds the Jupyter server's Python: opts.Python when set; else,
// when opts.ParentPID is set and that process is a Python that can import
// jupyter_server, that process's interpreter (ProcessPython: the server
// that started the bridge knows its own sys.prefix, whatever PATH says);
// else, when it can import jupyter_server, the interpreter of the Python
// environment a wheel installed this bridge into (opts.Self's
// site-packages: the console script's own Python, as Jupyter's commands
// act on the Python that runs them), then that of the active virtual
// environment (VIRTUAL_ENV); else the interpreter named by the shebang of
// the jupyter-server or jupyter script on PATH; else every python3 (then
// python) on PATH, preferring one that can import jupyter_server over one
// that can only import traitlets. A candidate is accepted only when it
// runs and imports traitlets; Python.Source says which rule found it. The
// error lists what was tried.
func FindPython(ctx context.Context, opts Options) (*Python, error) {
	e := opts.resolve()
	if opts.Python == "none" {
		return nil, errors.New("python disabled (Python is \"none\")")
	}
	// A trusted candidate (the explicit choice or a jupyter script's
	// interpreter) is accepted when it imports traitlets; the parent
	// process and a python found only on PATH are preferred when they
	// also import jupyter_server.
	type cand struct {
		path    string
		trusted bool
		source  string
		server  bool // used only if it imports jupyter_server (the parent process, the bridge's environment, VIRTUAL_ENV)
	}
	var cands []cand
	var tried []string
	if opts.Python != "" {
		cands = []cand{{opts.Python, true, "--python", false}}
	} else {
		if opts.ParentPID > 0 {
			if p, err := processInterpreter(opts.ParentPID); err != nil {
				tried = append(tried, fmt.Sprintf("the parent process %d (%v)", opts.ParentPID, err))
			} else {
				cands = append(cands, cand{p, false, fmt.Sprintf("the parent process (pid %d)", opts.ParentPID), true})
			}
		}
		envs := [][2]string{}
		if e.self != "" {
			if prefix := installedPrefix(e.self); prefix != "" {
				envs = append(envs, [2]string{prefix, "the Python environment the bridge is installed in (" + prefix + ")"})
			}
		}
		if v := e.vars["VIRTUAL_ENV"]; v != "" && filepath.IsAbs(v) {
			envs = append(envs, [2]string{v, "the active virtual environment (VIRTUAL_ENV=" + v + ")"})
		}
		for _, env := range envs {
			for _, p := range envInterpreters(env[0]) {
				if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
					cands = append(cands, cand{p, false, env[1], true})
					break
				}
			}
		}
		for _, script := range []string{"jupyter-server", "jupyter"} {
			if p, ok := e.lookPath(script); ok {
				if interp := shebangInterpreter(e, p); interp != "" {
					cands = append(cands, cand{interp, true, "the #! line of " + p, false})
				}
			}
		}
		for _, name := range []string{"python3", "python"} {
			for _, p := range e.lookPathAll(name) {
				cands = append(cands, cand{p, false, name + " on PATH", false})
			}
		}
	}
	var fallback *Python
	seen := map[string]bool{}
	for _, c := range cands {
		if seen[c.path] {
			continue
		}
		seen[c.path] = true
		py, err := probePython(ctx, e, c.path, opts.pythonTimeout())
		switch {
		case err != nil:
			tried = append(tried, fmt.Sprintf("%s (%v)", c.path, err))
		case py.Traitlets == "":
			tried = append(tried, c.path+" (cannot import traitlets)")
		case c.trusted || py.JupyterServer != "":
			py.Source = c.source
			return py, nil
		case c.server:
			tried = append(tried, c.path+" ("+c.source+", but it cannot import jupyter_server)")
		default:
			if fallback == nil {
				py.Source = c.source
				fallback = py
			}
			tried = append(tried, c.path+" (no jupyter_server)")
		}
	}
	if fallback != nil {
		return fallback, nil
	}
	if len(tried) == 0 {
		return nil, errors.New("no python3 or jupyter script on PATH")
	}
	return nil, fmt.Errorf("no Python with traitlets found; tried %s", strings.Join(tried, ", "))
}

// LauncherPython returns the jupyter-server (else jupyter) script on
// PATH and the interpreter its #! line names: what `jupyter server` or
// `jupyter lab` typed in a shell would run. Both are "" when there is none.
func LauncherPython(opts Options) (launcher, interpreter string) {
	e := opts.resolve()
	for _, script := range []string{"jupyter-server", "jupyter"} {
		if p, ok := e.lookPath(script); ok {
			if interp := shebangInterpreter(e, p); interp != "" {
				return p, interp
			}
		}
	}
	return "", ""
}

// ProcessPython returns the interpreter of the running process pid (a
// Jupyter server, say) as FindPython would take it, with the facts it
// gives (Source "process N"). The error says why there is none: the
// process is not a Python, cannot be inspected, or its interpreter does
// not run or cannot import traitlets.
func ProcessPython(ctx context.Context, opts Options, pid int) (*Python, error) {
	e := opts.resolve()
	p, err := processInterpreter(pid)
	if err != nil {
		return nil, err
	}
	py, err := probePython(ctx, e, p, opts.pythonTimeout())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if py.Traitlets == "" {
		return nil, fmt.Errorf("%s cannot import traitlets", p)
	}
	py.Source = fmt.Sprintf("process %d", pid)
	return py, nil
}

// procDir is where processInterpreter reads about processes.
const procDir = "/proc"

// processInterpreter returns the path that runs the same interpreter as
// process pid, as that process named it. /proc/<pid>/exe alone is not
// enough: it is the binary with every symlink resolved, so for a venv
// (whose bin/python is a symlink to the base interpreter) it would give
// the base installation's sys.prefix. Python computes sys.executable, and
// so sys.prefix, from argv[0]: a path (relative to the process's working
// directory) or a name looked up on the process's PATH. That path is
// returned when it is the same file as /proc/<pid>/exe; otherwise the
// resolved binary is. The error says why the process does not qualify:
// it cannot be inspected, is not a Python, or its binary was replaced since
// it started.
func processInterpreter(pid int) (string, error) {
	dir := filepath.Join(procDir, strconv.Itoa(pid))
	exeLink := filepath.Join(dir, "exe")
	exe, err := os.Readlink(exeLink)
	if err != nil {
		return "", fmt.Errorf("cannot inspect it: %w", err)
	}
	if strings.HasSuffix(exe, " (deleted)") {
		return "", fmt.Errorf("its interpreter %s was replaced after it started", strings.TrimSuffix(exe, " (deleted)"))
	}
	if !strings.Contains(filepath.Base(exe), "python") {
		return "", fmt.Errorf("it runs %s, not a Python", exe)
	}
	exeInfo, err := os.Stat(exeLink)
	if err != nil {
		return "", fmt.Errorf("cannot inspect it: %w", err)
	}
	if argv0 := processArgv0(dir); argv0 != "" {
		var p string
		switch {
		case filepath.IsAbs(argv0):
			p = argv0
		case strings.Contains(argv0, "/"):
			if cwd, err := os.Readlink(filepath.Join(dir, "cwd")); err == nil {
				p = filepath.Join(cwd, argv0)
			}
		default:
			p = lookPathIn(processEnv(dir, "PATH"), argv0)
		}
		if p != "" {
			if st, err := os.Stat(p); err == nil && os.SameFile(st, exeInfo) {
				return filepath.Clean(p), nil
			}
		}
	}
	return exe, nil
}

// processArgv0 is argv[0] of the process whose /proc directory is dir, or
// "" when it cannot be read.
func processArgv0(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		return ""
	}
	argv0, _, _ := bytes.Cut(b, []byte{0})
	return string(argv0)
}

// processEnv is the value of variable name in the environment the process
// whose /proc directory is dir started with, or "".
func processEnv(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, "environ"))
	if err != nil {
		return ""
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if k, v, ok := bytes.Cut(kv, []byte("=")); ok && string(k) == name {
			return string(v)
		}
	}
	return ""
}

// lookPathIn finds the executable file in the directories of path (a PATH
// value), or returns "", by child.LookPath's rule.
func lookPathIn(path, file string) string {
	p, _ := child.LookPath(file, path, "")
	return p
}

// shebangInterpreter returns the interpreter named on the first line of the
// script at path ("#!/usr/bin/python3" or "#!/usr/bin/env python3"), or "".
func shebangInterpreter(e env, path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, 512)).ReadString('\n')
	if err != nil && line == "" {
		return ""
	}
	line, ok := strings.CutPrefix(strings.TrimSpace(line), "#!")
	if !ok {
		return ""
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return ""
	}
	interp := fields[0]
	if strings.HasSuffix(interp, "/env") {
		fields = fields[1:]
		for len(fields) > 0 && strings.HasPrefix(fields[0], "-") {
			fields = fields[1:]
		}
		if len(fields) == 0 {
			return ""
		}
		p, ok := e.lookPath(fields[0])
		if !ok {
			return ""
		}
		interp = p
	}
	if !strings.Contains(interp[strings.LastIndex(interp, "/")+1:], "python") {
		return ""
	}
	return interp
}

func probePython(ctx context.Context, e env, path string, timeout time.Duration) (*Python, error) {
	out, err := runPython(ctx, e, path, probeScript, nil, timeout)
	if err != nil {
		return nil, err
	}
	py := &Python{Path: path}
	if err := json.Unmarshal(out, py); err != nil {
		return nil, fmt.Errorf("unreadable probe answer: %w", err)
	}
	py.Path = path
	return py, nil
}

// runPython runs script with the interpreter at path in its own process
// group, with stdin as its standard input, and returns its standard output
// (at most 64 MiB). The process group is killed when ctx ends or the
// timeout passes.
func runPython(ctx context.Context, e env, path, script string, stdin []byte, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-c", script)
	cmd.Env = e.environ
	cmd.Stdin = bytes.NewReader(stdin)
	child.InGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	var stdout limitedBuffer
	stdout.limit = 64 << 20
	var stderr tailBuffer
	stderr.limit = 2048
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("did not finish within %s", timeout)
		}
		tail := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(tail, '\n'); i >= 0 {
			tail = tail[i+1:]
		}
		if tail != "" {
			return nil, fmt.Errorf("%w: %s", err, tail)
		}
		return nil, err
	}
	if stdout.over {
		return nil, errors.New("answer larger than 64 MiB")
	}
	return stdout.Bytes(), nil
}

// limitedBuffer keeps the first limit bytes written to it.
type limitedBuffer struct {
	bytes.Buffer
	limit int
	over  bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.Len(); len(p) > room {
		b.over = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	buf   []byte
	limit int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.limit {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.limit:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string { return string(b.buf) }

// pyValue is one trait's value in one .py file.
type pyValue struct {
	Kind   string          `json:"kind"` // "value", "lazy" or "error"
	Value  json.RawMessage `json:"value"`
	Update json.RawMessage `json:"update"` // lazy: the dict given to .update()
	Other  []string        `json:"other"`  // lazy: other container operations used
	Error  string          `json:"error"`
}

// pyResult is the evaluation of one .py file.
type pyResult struct {
	File   string             `json:"file"`
	Error  string             `json:"error"`
	Line   int                `json:"line"`
	Values map[string]pyValue `json:"values"`
}

// evalPyFiles evaluates files with py in one process and returns each
// file's values of traits ("Section.trait").
func evalPyFiles(ctx context.Context, e env, py *Python, files []string, traits [][2]string, timeout time.Duration) (map[string]pyResult, error) {
	req, _ := json.Marshal(map[string]any{"files": files, "traits": traits})
	out, err := runPython(ctx, e, py.Path, evalScript, req, timeout)
	if err != nil {
		return nil, err
	}
	var ans struct {
		Results []pyResult `json:"results"`
	}
	if err := json.Unmarshal(out, &ans); err != nil {
		return nil, fmt.Errorf("unreadable answer from %s: %w", py.Path, err)
	}
	m := make(map[string]pyResult, len(ans.Results))
	for _, r := range ans.Results {
		m[r.File] = r
	}
	return m, nil
}
