package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// The administration subcommands: servers, install, uninstall (this file)
// and doctor (admin_doctor.go). They read configuration through the
// jupyter package and print one line per finding.

// configFlags are the flags shared by servers and doctor.
type configFlags struct {
	python     string
	rootDir    string
	servers    string
	standalone bool // servers and doctor: what make run uses
}

func (c *configFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.python, "python", "", "the Jupyter server's Python (default: the interpreter of the jupyter script on PATH, else a python3 with traitlets)")
	fs.StringVar(&c.rootDir, "root-dir", "", "the Jupyter server's root_dir, for ${workspaceFolder} (default: the working directory)")
	fs.StringVar(&c.servers, "servers", "", "read a {\"mcpServers\": …} JSON file instead of Jupyter's configuration")
}

// registerStandalone adds --standalone (servers, doctor and check).
func (c *configFlags) registerStandalone(fs *flag.FlagSet) {
	fs.BoolVar(&c.standalone, "standalone", false, "describe what make run uses: its servers file (--servers, default "+makeRunServersFile+") with this binary as megane-jupyter-bridge, and no Jupyter")
}

// makeRunServersFile is the servers file of make run, relative to the
// repository root.
const makeRunServersFile = "etc/demo-servers.json"

// standaloneSetup makes --standalone look at what make run runs: its
// servers file, and this binary's directory first on PATH (make run puts
// bin/ there), so that the file's "megane-jupyter-bridge" is this binary.
func (c *configFlags) standaloneSetup() error {
	if !c.standalone {
		return nil
	}
	if c.servers == "" {
		if _, err := os.Stat(makeRunServersFile); err != nil {
			return usageError{"--standalone: " + makeRunServersFile + " (what make run uses) is not in the working directory: run from the repository root, or give --servers FILE"}
		}
		c.servers = makeRunServersFile
	}
	if bin, err := thisBinary(); err == nil {
		os.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	return nil
}

// standaloneLine says what --standalone describes.
func (c *configFlags) standaloneLine() string {
	bin, _ := thisBinary()
	return fmt.Sprintf("standalone (as make run): servers from %s, megane-jupyter-bridge is %s; no Jupyter, so its configuration, registration and servers are not consulted", c.servers, bin)
}

func (c *configFlags) load(ctx context.Context) (*jupyter.Config, error) {
	opts := jupyter.Options{Python: c.python, RootDir: c.rootDir}
	opts.Self, _ = thisBinary()
	if c.servers != "" {
		return jupyter.LoadServersFile(c.servers, opts)
	}
	return jupyter.Load(ctx, opts)
}

// serverJSON is one server in `servers --json`: the description
// tools:servers gives (env and header values are never printed, only their
// names) and the configuration level it comes from.
type serverJSON struct {
	bridge.ServerDescription
	Level string `json:"level"`
}

type serversJSON struct {
	Servers    []serverJSON          `json:"servers"`
	Problems   []bridge.Problem      `json:"problems"`
	Files      []bridge.SettingsFile `json:"files"`
	UserFile   *bridge.SettingsFile  `json:"userFile"`
	ConfigPath []string              `json:"configPath"`
	Python     string                `json:"python,omitempty"`
}

func runServers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("servers", flag.ContinueOnError)
	var cf configFlags
	cf.register(fs)
	cf.registerStandalone(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args, serversHelp, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{"servers takes no arguments"}
	}
	if err := cf.standaloneSetup(); err != nil {
		return err
	}
	if cf.standalone && !*asJSON {
		fmt.Fprintln(stdout, cf.standaloneLine())
	}
	cfg, err := cf.load(ctx)
	if err != nil {
		return err
	}
	out := serversJSON{Servers: []serverJSON{}, Problems: cfg.Problems, Files: cfg.Files, ConfigPath: cfg.ConfigPath}
	if out.Problems == nil {
		out.Problems = []bridge.Problem{}
	}
	if out.Files == nil {
		out.Files = []bridge.SettingsFile{}
	}
	if cfg.UserFile.Path != "" {
		uf := cfg.UserFile
		out.UserFile = &uf
	}
	if cfg.Python != nil {
		out.Python = cfg.Python.Path
	}
	for _, e := range cfg.Servers {
		out.Servers = append(out.Servers, serverJSON{ServerDescription: e.Describe(), Level: e.Level})
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if len(cfg.Servers) == 0 {
		fmt.Fprintln(stdout, "no servers")
	}
	for _, s := range out.Servers {
		target := s.CommandLine
		if s.Transport == bridge.TransportHTTP {
			target = s.URL
		}
		printLine(stdout, "%s (%s): %s", s.Name, s.Transport, target)
		if s.Cwd != "" {
			printLine(stdout, "  cwd:         %s", s.Cwd)
		}
		if len(s.Env) > 0 {
			printLine(stdout, "  env:         %s", strings.Join(s.Env, ", "))
		}
		if len(s.Headers) > 0 {
			printLine(stdout, "  headers:     %s", strings.Join(s.Headers, ", "))
		}
		printLine(stdout, "  source:      %s", s.Source)
		printLine(stdout, "  fingerprint: %s", s.Fingerprint)
		for _, w := range s.Warnings {
			printLine(stdout, "  warning:     %s", w)
		}
	}
	if len(cfg.Problems) > 0 {
		fmt.Fprintln(stdout, "problems:")
		for _, p := range cfg.Problems {
			printLine(stdout, "  %s", p.Message)
		}
	}
	return nil
}

// installFlags are the flags of install and uninstall.
type installFlags struct {
	user, sysPrefix, system bool
	python                  string
	bridge                  string
	jupyterURL              string
	absoluteURL             bool
}

func parseInstallFlags(name string, args []string, stdout, stderr io.Writer) (*installFlags, string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	f := &installFlags{}
	fs.BoolVar(&f.user, "user", false, "the user's config directory: JUPYTER_CONFIG_DIR, else ~/.jupyter (the default)")
	fs.BoolVar(&f.sysPrefix, "sys-prefix", false, "{sys.prefix}/etc/jupyter of the Jupyter server's Python")
	fs.BoolVar(&f.system, "system", false, "/usr/local/etc/jupyter")
	fs.StringVar(&f.python, "python", "", "the Jupyter server's Python, for --sys-prefix")
	if name == "install" {
		fs.StringVar(&f.bridge, "bridge", "", "the bridge binary the registration runs (default: this one)")
		fs.BoolVar(&f.absoluteURL, "absolute-url", false, "register with absolute_url true (jupyter-server-proxy forwards whole paths); the bridge answers both modes")
		fs.StringVar(&f.jupyterURL, "jupyter-url", "", "the Jupyter server serve asks for verdicts, e.g. https://hub.example.org{base_url} (needed under JupyterHub internal SSL)")
	}
	h := installHelp
	if name == "uninstall" {
		h = uninstallHelp
	}
	if err := parseFlags(fs, args, h, stdout, stderr); err != nil {
		return nil, "", err
	}
	if fs.NArg() > 0 {
		return nil, "", usageError{name + " takes no arguments"}
	}
	level := jupyter.InstallUser
	n := 0
	for _, x := range []struct {
		set   bool
		level string
	}{{f.user, jupyter.InstallUser}, {f.sysPrefix, jupyter.InstallSysPrefix}, {f.system, jupyter.InstallSystem}} {
		if x.set {
			n++
			level = x.level
		}
	}
	if n > 1 {
		return nil, "", usageError{"give at most one of --user, --sys-prefix, --system"}
	}
	if f.jupyterURL != "" {
		if err := jupyter.CheckJupyterURL(f.jupyterURL); err != nil {
			return nil, "", usageError{err.Error()}
		}
	}
	return f, level, nil
}

// thisBinary is the absolute path of the running executable.
func thisBinary() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cannot find this program's path: %w", err)
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return p, nil
}

func runInstall(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, level, err := parseInstallFlags("install", args, stdout, stderr)
	if err != nil {
		return err
	}
	bin := f.bridge
	if bin == "" {
		if bin, err = thisBinary(); err != nil {
			return err
		}
	} else if bin, err = filepath.Abs(bin); err != nil {
		return err
	}
	opts, err := installOptions(ctx, f, level, stdout)
	if err != nil {
		return err
	}
	path, err := jupyter.InstallFile(ctx, level, opts)
	if err != nil {
		return err
	}
	changed, err := jupyter.InstallRegistration(path, bin, f.jupyterURL, f.absoluteURL)
	if err != nil {
		return err
	}
	if changed {
		fmt.Fprintf(stdout, "registered %q with jupyter-server-proxy in %s (runs %s); restart the Jupyter server to use it\n", jupyter.ProxyServerName, path, bin)
	} else {
		fmt.Fprintf(stdout, "already registered in %s (runs %s)\n", path, bin)
	}
	// Say so when a higher-priority file hides the registration.
	if cfg, err := jupyter.Load(ctx, opts); err == nil {
		if raw, ok := cfg.ServerProxy.Servers[jupyter.ProxyServerName]; !ok || !jupyter.IsBridgeRegistration(raw) {
			fmt.Fprintf(stderr, "warning: ServerProxy.servers in %s replaces the value in %s, so Jupyter will not see this registration; add %q there or remove it\n",
				strings.Join(cfg.ServerProxy.Files, ", "), path, jupyter.ProxyServerName)
		}
		if cfg.Python != nil && !cfg.Python.ServerProxy {
			fmt.Fprintf(stderr, "warning: jupyter-server-proxy is not installed for %s: %s, or the bridge cannot be reached\n", cfg.Python.Path, pipAdvice(cfg.Python, "jupyter-server-proxy"))
		}
		if cfg.Python != nil {
			if eps, err := jupyter.ProxyEntryPoints(ctx, opts, cfg.Python); err == nil {
				for _, ep := range eps {
					if ep.Name == jupyter.ProxyServerName && ep.Error == "" {
						fmt.Fprintf(stderr, "note: %s %s (pip) registers the bridge too, through its entry point; jupyter-server-proxy serves this registration instead (uninstall goes back to the pip-installed one)\n", ep.Dist, ep.DistVersion)
					}
				}
			}
		}
	}
	return nil
}

// installOptions are the options install and uninstall find Jupyter's
// files with. --sys-prefix is the prefix of the Jupyter server's Python as
// FindPython finds it: the environment a wheel installed this bridge into
// (the console script's own Python, as Jupyter's own commands take
// --sys-prefix from the Python that runs them), else the active virtual
// environment, else the jupyter script's; the first line says which, and
// why.
func installOptions(ctx context.Context, f *installFlags, level string, stdout io.Writer) (jupyter.Options, error) {
	opts := jupyter.Options{Python: f.python}
	opts.Self, _ = thisBinary()
	if level != jupyter.InstallSysPrefix {
		return opts, nil
	}
	py, err := jupyter.FindPython(ctx, opts)
	if err != nil {
		return opts, fmt.Errorf("--sys-prefix needs the Jupyter server's Python (give it with --python): %w", err)
	}
	opts.SysPrefix = py.Prefix
	fmt.Fprintf(stdout, "--sys-prefix: %s, the sys.prefix of %s (found by %s)\n", py.Prefix, py.Path, py.Source)
	return opts, nil
}

func runUninstall(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, level, err := parseInstallFlags("uninstall", args, stdout, stderr)
	if err != nil {
		return err
	}
	opts, err := installOptions(ctx, f, level, stdout)
	if err != nil {
		return err
	}
	path, err := jupyter.InstallFile(ctx, level, opts)
	if err != nil {
		return err
	}
	changed, err := jupyter.UninstallRegistration(path)
	if err != nil {
		return err
	}
	if changed {
		fmt.Fprintf(stdout, "removed the %q registration from %s\n", jupyter.ProxyServerName, path)
	} else {
		fmt.Fprintf(stdout, "nothing to remove: %s has no %q registration\n", path, jupyter.ProxyServerName)
	}
	return nil
}

// printLine prints one line of a listing whose values come from
// configuration files or tool servers, with their control characters
// escaped (termSafe).
func printLine(w io.Writer, format string, a ...any) {
	fmt.Fprintln(w, termSafe(fmt.Sprintf(format, a...)))
}
