package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/child"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
	"github.com/megane-labs/megane-jupyter-bridge/stdio"
)

// report prints doctor's findings, one line each: "ok:", "warning:" or
// "error:" and a sentence naming what to do. An error is what keeps the
// bridge from serving pages (doctor exits 1); a warning is what a page
// would meet but the bridge survives, such as one tool server that cannot
// start (doctor exits 0, or 1 with --strict).
type report struct {
	out      io.Writer
	errors   int
	warnings int
}

func (r *report) add(level, format string, a ...any) {
	switch level {
	case "error":
		r.errors++
	case "warning":
		r.warnings++
	}
	fmt.Fprintf(r.out, "%-8s %s\n", level+":", termSafe(fmt.Sprintf(format, a...)))
}

func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	var cf configFlags
	cf.register(fs)
	cf.registerStandalone(fs)
	spawn := fs.Bool("spawn", false, "start each server, time initialize and tools/list, and check its tools against the Builder Tool Contract (as check does)")
	timeout := fs.Duration("timeout", 2*time.Minute, "with --spawn: how long each server may take to answer initialize and tools/list")
	jupyterURL := fs.String("jupyter-url", "", "the Jupyter server to check (default: every server in Jupyter's runtime directory)")
	strict := fs.Bool("strict", false, "exit with status 1 on warnings too (a tool server that cannot start, ...), not only on what keeps the bridge from serving pages")
	if err := parseFlags(fs, args, doctorHelp, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{"doctor takes no arguments"}
	}
	if err := cf.standaloneSetup(); err != nil {
		return err
	}
	r := &report{out: stdout}
	if cf.standalone {
		r.add("ok", "%s", cf.standaloneLine())
	}
	cfg, err := cf.load(ctx)
	if err != nil {
		r.add("error", "%v", err)
		return fmt.Errorf("doctor found %d problem(s)", r.errors)
	}
	if cf.servers == "" {
		checkPython(r, cfg)
		checkRegistration(ctx, r, cfg)
	}
	r.add("ok", "containment: %s", child.Containment())
	for _, p := range cfg.Problems {
		r.add("error", "%s", p.Message)
	}
	for _, e := range cfg.Servers {
		target := e.CommandLine()
		if e.Transport == bridge.TransportHTTP {
			target = e.URL
		}
		if e.Transport == bridge.TransportStdio && !filepath.IsAbs(e.Command) {
			// The command was not found: the server cannot start. The
			// bridge serves the other servers: a warning, not an error.
			for _, w := range e.Warnings {
				r.add("warning", "%s", w)
			}
			continue
		}
		r.add("ok", "server %s (%s, %s): %s", e.Name, e.Transport, e.Source, target)
		for _, w := range e.Warnings {
			r.add("warning", "%s", w)
		}
	}
	if cf.servers == "" {
		checkJupyter(ctx, r, *jupyterURL, cfg)
	}
	if *spawn {
		for _, e := range cfg.Servers {
			if e.Transport == bridge.TransportStdio && !filepath.IsAbs(e.Command) {
				continue // its command was not found: said above, once
			}
			revision := spawnCheck(ctx, r, cfg, e, *timeout)
			if revision == "" {
				continue // said: the checks of check need a started server
			}
			// The Builder Tool Contract checks of `check`, as doctor lines.
			for _, f := range checkServer(ctx, cfg, e, *timeout, revision) {
				level := map[string]string{"ok": "ok", "warn": "warning", "fail": "error"}[f.Level]
				line := strings.TrimPrefix(f.String(), f.Level+": ")
				if f.Tool != "" {
					line = "server " + e.Name + ": " + line
				}
				r.add(level, "%s", line)
			}
		}
	}
	if r.errors > 0 {
		return fmt.Errorf("doctor found %d problem(s)", r.errors)
	}
	if *strict && r.warnings > 0 {
		return fmt.Errorf("doctor found %d warning(s), and --strict counts them", r.warnings)
	}
	if r.warnings > 0 {
		fmt.Fprintf(stdout, "no problems found that keep the bridge from serving pages; %d warning(s) above\n", r.warnings)
		return nil
	}
	fmt.Fprintln(stdout, "no problems found")
	return nil
}

func checkPython(r *report, cfg *jupyter.Config) {
	py := cfg.Python
	if py == nil {
		r.add("warning", "no Python with traitlets found for the Jupyter server (%s): .py config files cannot be read and {sys.prefix}/etc/jupyter is not searched; pass --python", cfg.PythonError)
		return
	}
	r.add("ok", "Jupyter's Python: %s, found by %s (sys.prefix %s, jupyter_server %s, traitlets %s)", py.Path, py.Source, py.Prefix, orNone(py.JupyterServer), py.Traitlets)
	if py.JupyterServer == "" {
		r.add("warning", "%s cannot import jupyter_server: is it the Jupyter server's Python? pass --python", py.Path)
	}
	if !py.ServerProxy {
		r.add("error", "jupyter-server-proxy is not installed for %s: %s, or pages cannot reach the bridge", py.Path, pipAdvice(py, "jupyter-server-proxy"))
	}
	// The environment judged is not what `jupyter lab` typed in a shell
	// would run: say how to start Jupyter so that it is.
	if strings.HasPrefix(py.Source, "the Python environment the bridge") || strings.HasPrefix(py.Source, "the active virtual environment") {
		launcher, interp := jupyter.LauncherPython(jupyter.Options{})
		if launcher != "" && filepath.Dir(interp) != filepath.Dir(py.Path) && filepath.Dir(interp) != filepath.Dir(py.Executable) {
			r.add("warning", "jupyter on PATH (%s) runs %s, which does not see %s's packages (the bridge, jupyter-server-proxy): start Jupyter with %s -m jupyter lab (or pip install jupyterlab there, which puts its own jupyter on that environment's PATH)", launcher, interp, py.Prefix, py.Path)
		}
	}
}

// pipAdvice says how to install pkg for py: its own pip, or, where PEP 668
// makes that pip refuse (a distribution's Python), a venv over it.
func pipAdvice(py *jupyter.Python, pkg string) string {
	if py.ExternallyManaged {
		return fmt.Sprintf("%s is the system's (PEP 668: its pip refuses to install), so make a venv that sees its Jupyter, %s -m venv --system-site-packages ~/jupyter-venv, install there (~/jupyter-venv/bin/pip install %s megane-jupyter-bridge) and start Jupyter with ~/jupyter-venv/bin/python -m jupyter lab", py.Path, py.Path, pkg)
	}
	return fmt.Sprintf("install it with %s -m pip install %s", py.Path, pkg)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func checkRegistration(ctx context.Context, r *report, cfg *jupyter.Config) {
	sp := cfg.ServerProxy
	raw, ok := sp.Servers[jupyter.ProxyServerName]
	for _, d := range cfg.Dirs {
		frags, _ := filepath.Glob(filepath.Join(d.Path, "jupyter_server_config.d", "*.json"))
		for _, f := range frags {
			if data, err := os.ReadFile(f); err == nil && strings.Contains(string(data), `"ServerProxy"`) {
				r.add("warning", "%s sets ServerProxy, but Jupyter reads only ServerApp.jpserver_extensions from jupyter_server_config.d; run megane-jupyter-bridge install and remove it", f)
			}
		}
	}
	where := strings.Join(sp.Files, ", ")
	fix := "run megane-jupyter-bridge install again"
	ep := bridgeEntryPoint(ctx, r, cfg)
	switch {
	case ok && ep != nil:
		// jupyter-server-proxy adds configured servers before entry
		// points: for the same name, the configured one is served.
		if ep.Error == "" && !sameCommand(raw, ep.Options) {
			r.add("warning", "the bridge is registered twice: ServerProxy.servers.%s in %s is served, not the entry point of %s %s (pip); run megane-jupyter-bridge uninstall to use the pip-installed bridge, or pip uninstall %s",
				jupyter.ProxyServerName, where, ep.Dist, ep.DistVersion, ep.Dist)
		}
	case ep != nil:
		where = fmt.Sprintf("the jupyter_serverproxy_servers entry point %s (%s) of %s %s", ep.Name, ep.Value, ep.Dist, ep.DistVersion)
		fix = "reinstall the wheel (pip install --force-reinstall megane_jupyter_bridge-….whl)"
		if ep.Error != "" {
			r.add("error", "%s cannot be loaded, so jupyter-server-proxy skips it (%s); %s", where, ep.Error, fix)
			return
		}
		raw = ep.Options
	case !ok:
		hint := "run megane-jupyter-bridge install (--user, --sys-prefix or --system), or pip install the bridge's wheel into the Jupyter server's environment"
		if len(sp.Files) > 0 {
			hint = fmt.Sprintf("ServerProxy.servers in %s replaces lower-priority values and has no %q; add it there, or run install at that level", strings.Join(sp.Files, ", "), jupyter.ProxyServerName)
		}
		if len(sp.Unread) > 0 {
			hint += fmt.Sprintf(" (%s could not be evaluated)", strings.Join(sp.Unread, ", "))
		}
		r.add("error", "the bridge is not registered with jupyter-server-proxy: %s", hint)
		return
	}
	var reg struct {
		Command []string `json:"command"`
	}
	if json.Unmarshal(raw, &reg) != nil || len(reg.Command) == 0 {
		r.add("error", "the registration %s has no command list; %s", in(where), fix)
		return
	}
	if !jupyter.IsBridgeRegistration(raw) {
		r.add("warning", "the registration %s differs from what install writes; %s unless that is intended", in(where), fix)
	}
	// Under JupyterHub internal SSL the single-user server takes client
	// certificates only from the Hub and its proxy: the bridge must ask
	// through the Hub (--jupyter-url) or it refuses every socket.
	if os.Getenv("JUPYTERHUB_SSL_CERTFILE") != "" && !slices.ContainsFunc(reg.Command, func(a string) bool { return strings.HasPrefix(a, "--jupyter-url") }) {
		r.add("error", "JupyterHub internal SSL is on (JUPYTERHUB_SSL_CERTFILE is set) and the registration %s has no --jupyter-url, so the bridge cannot ask the server and refuses every page (4503): run megane-jupyter-bridge install --jupyter-url 'https://<hub address>{base_url}'", in(where))
	}
	d := findDeployment()
	if ok {
		checkConfigFlag(r, d, sp.Files)
	}
	cmd := reg.Command[0]
	a, errA := os.Stat(cmd)
	if errA != nil {
		r.add("error", "the registration %s runs %s, which does not exist; %s", in(where), cmd, fix)
		return
	}
	if me, err := thisBinary(); err != nil {
		r.add("warning", "%v", err)
	} else if b, err := os.Stat(me); err == nil && !os.SameFile(a, b) {
		r.add("warning", "the registration %s runs %s, not this binary (%s); run install with the binary you mean", in(where), cmd, me)
	}
	// Judge the registration by what it does: jupyter-server-proxy starts
	// the command and forwards the page's socket to one path.
	var e proxyEntry
	json.Unmarshal(raw, &e)
	path := forwardedPath(d.base, e.AbsoluteURL)
	took, err := probeRegistration(ctx, e, d)
	if err != nil {
		r.add("error", "the registration %s does not serve pages at base_url %s (%s, absolute_url %t): %v; %s",
			in(where), d.base, d.source, e.AbsoluteURL, err, fix)
		return
	}
	r.add("ok", "registered with jupyter-server-proxy as %q %s, running %s: started as jupyter-server-proxy would for base_url %s (%s) in %s, it answers %s, the path that {base_url}%s/builder-tools/ws reaches it by (absolute_url %t)",
		jupyter.ProxyServerName, in(where), cmd, d.base, d.source, took.Round(time.Millisecond), path, jupyter.ProxyServerName, e.AbsoluteURL)
}

// in is "in FILES" for configuration files, the entry point's description
// as it is ("the … entry point …", which starts with "the").
func in(where string) string {
	if strings.HasPrefix(where, "the ") {
		return "through " + where
	}
	return "in " + where
}

// bridgeEntryPoint is the jupyter_serverproxy_servers entry point named
// megane in the Jupyter server's Python (what the bridge's wheel installs),
// or nil when there is none or it cannot be listed (then said as a warning).
func bridgeEntryPoint(ctx context.Context, r *report, cfg *jupyter.Config) *jupyter.ProxyEntryPoint {
	if cfg.Python == nil {
		return nil // checkPython has said why
	}
	eps, err := jupyter.ProxyEntryPoints(ctx, jupyter.Options{}, cfg.Python)
	if err != nil {
		r.add("warning", "%v; a pip-installed registration is not checked", err)
		return nil
	}
	for i := range eps {
		if eps[i].Name == jupyter.ProxyServerName {
			return &eps[i]
		}
	}
	return nil
}

// sameCommand reports whether two registrations run the same command line.
func sameCommand(a, b json.RawMessage) bool {
	var x, y struct{ Command []string }
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && slices.Equal(x.Command, y.Command)
}

// checkJupyter finds the running Jupyter servers (or the one at url) and
// asks each for its version. For a server found from its runtime file it
// also compares that server's own Python with the one cfg was read with:
// the bridge that server starts reads configuration with the server's
// Python, so a different sys.prefix means doctor checked other files.
func checkJupyter(ctx context.Context, r *report, url string, cfg *jupyter.Config) {
	type found struct {
		p   *jupyter.Parent
		pid int // 0 for --jupyter-url
	}
	var parents []found
	if url != "" {
		p, err := jupyter.FindParent(jupyter.ParentOptions{URL: url})
		if err != nil {
			r.add("error", "%v", err)
			return
		}
		parents = append(parents, found{p, 0})
	} else {
		dir := jupyter.RuntimeDir(jupyter.Options{})
		stale := 0
		for _, f := range runtimeFiles(dir) {
			if !f.alive {
				// jupyter_server 2.x leaves them behind when it is killed,
				// and they pile up across restarts: counted, not warned of.
				stale++
				continue
			}
			p, err := jupyter.FindParent(jupyter.ParentOptions{PPID: f.pid})
			if err != nil {
				r.add("warning", "%s: %v", f.path, err)
				continue
			}
			parents = append(parents, found{p, f.pid})
		}
		if stale > 0 {
			r.add("ok", "ignored %d runtime file(s) (jpserver-<pid>.json) in %s of Jupyter servers that no longer run", stale, dir)
		}
		if len(parents) == 0 {
			// An image being built has none running: nothing is wrong.
			r.add("ok", "no running Jupyter server found in %s: its checks were skipped (start one, or set JUPYTER_RUNTIME_DIR as the server has it, to run them)", dir)
			return
		}
	}
	for _, f := range parents {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		v, err := f.p.Version(cctx)
		cancel()
		if err != nil {
			r.add("error", "Jupyter server %s cannot be reached: %v", f.p, err)
			continue
		}
		r.add("ok", "Jupyter server %s answers (jupyter_server %s)", f.p, v)
		if f.pid == 0 {
			continue
		}
		// A server run by another user, or not by a Python, cannot be
		// compared; that is no finding.
		spy, err := jupyter.ProcessPython(ctx, jupyter.Options{}, f.pid)
		if err != nil {
			continue
		}
		switch py := cfg.Python; {
		case py == nil:
			r.add("warning", "Jupyter server pid %d runs %s (sys.prefix %s), which this check could not use; pass --python %s to check the configuration the bridge it starts reads", f.pid, spy.Path, spy.Prefix, spy.Path)
		case py.Prefix != spy.Prefix:
			r.add("warning", "Jupyter server pid %d runs %s (sys.prefix %s), but this check used %s (sys.prefix %s, found by %s); the bridge it starts reads configuration with the server's own Python: pass --python %s to check that", f.pid, spy.Path, spy.Prefix, py.Path, py.Prefix, py.Source, spy.Path)
		}
	}
}

// entryTransport is the MCP transport the bridge uses for e: its own stdio
// transport (junk on stdout skipped, the whole process group stopped, the
// environment filtered by the admin's strip list) or Streamable HTTP with
// the entry's headers. pipes is nil for HTTP, auth nil for stdio: auth sees
// the HTTP server's answers, for the line to print when it wants
// credentials. The stdio transport logs the lines it skips on the server's
// stdout to log (nil discards).
func entryTransport(cfg *jupyter.Config, e bridge.ServerSpec, log *slog.Logger) (transport mcp.Transport, pipes *stdio.Transport, auth *bridge.AuthWatch) {
	switch e.Transport {
	case bridge.TransportStdio:
		pipes = stdio.NewTransport(stdio.Options{Name: e.Name, Command: e.Command, Args: e.Args,
			Env: child.Environ(os.Environ(), cfg.Admin.StripEnv, e.Env), Dir: e.Cwd, TerminateDuration: time.Second, KillDuration: 2 * time.Second, Logger: log})
		return pipes, pipes, nil
	default:
		auth = &bridge.AuthWatch{}
		// MaxRetries as the bridge's default StreamRetries: a cut event
		// stream is resumed (Last-Event-ID) as in a real session.
		return &mcp.StreamableClientTransport{Endpoint: e.URL, MaxRetries: 5,
			HTTPClient: &http.Client{Transport: headerTransport{e.Headers, auth, http.DefaultTransport}}}, nil, auth
	}
}

// stderrHint is the last stderr lines of a stdio server, for an error
// message that does not already end with them.
func stderrHint(pipes *stdio.Transport, msg string) string {
	if pipes == nil {
		return ""
	}
	tail := pipes.StderrTail()
	if len(tail) == 0 || strings.Contains(msg, tail[len(tail)-1]) {
		return ""
	}
	return "; stderr: " + strings.Join(tail[max(0, len(tail)-3):], " | ")
}

// probe starts e through the bridge's own session start (bridge.Probe)
// with the admin's settings, as serve would, within timeout.
func probe(ctx context.Context, cfg *jupyter.Config, e bridge.ServerSpec, timeout time.Duration) (bridge.Probe, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts := bridgeOptions(cfg.Admin)
	opts.Name = "megane-jupyter-bridge-doctor"
	if opts.InitTimeout == 0 || opts.InitTimeout > timeout {
		opts.InitTimeout = timeout
	}
	b := bridge.New(opts)
	defer b.Close()
	return b.Probe(ctx, e)
}

// spawnCheck starts one server as serve's bridge would (probe), and
// reports the revision it speaks, the time of the handshake and of
// tools/list, and the tools a page would get; or the one line a page would
// be told. The revision is "" when the server did not start.
func spawnCheck(ctx context.Context, r *report, cfg *jupyter.Config, e bridge.ServerSpec, timeout time.Duration) (revision string) {
	p, err := probe(ctx, cfg, e, timeout)
	if err != nil {
		r.add("warning", "server %s: does not start: %v", e.Name, err)
		return ""
	}
	var si struct{ Name, Version string }
	info := ""
	if json.Unmarshal(p.ServerInfo, &si) == nil && si.Name != "" {
		info = nameVersion(si.Name, si.Version)
	}
	r.add("ok", "server %s%s: MCP %s, initialize %s, tools/list %s, %d tools", e.Name, info, p.ProtocolVersion,
		p.Initialize.Round(time.Millisecond), p.ListTools.Round(time.Millisecond), p.Tools)
	var dropped []struct{ Name, Reason string }
	_ = json.Unmarshal(p.Dropped, &dropped)
	for _, d := range dropped {
		r.add("warning", "server %s: tool %s is not offered to pages: %s", e.Name, d.Name, d.Reason)
	}
	return p.ProtocolVersion
}

// headerTransport adds an entry's headers to every request and shows auth
// every answer.
type headerTransport struct {
	headers map[string]string
	auth    *bridge.AuthWatch
	next    http.RoundTripper
}

func (h headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range h.headers {
		req.Header.Set(k, v)
	}
	resp, err := h.next.RoundTrip(req)
	if err == nil && h.auth != nil {
		h.auth.Observe(resp)
	}
	return resp, err
}
