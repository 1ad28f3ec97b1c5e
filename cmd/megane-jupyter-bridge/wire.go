package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"

	"github.com/megane-labs/megane-jupyter-bridge/auth"
	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/statuspage"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// wiring is what serve builds from its flags.
type wiring struct {
	opts     bridge.Options
	mode     string              // "standalone" or "jupyter"
	announce func(addr net.Addr) // prints how to connect, once listening
	closers  []func()            // run by close, last first
	// parentPID is the process that started serve in Jupyter mode (the
	// Jupyter server, under jupyter-server-proxy): serve stops when it
	// exits. 0 in standalone mode, which never watches its parent.
	parentPID int
}

func (w *wiring) close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]()
	}
}

func wire(ctx context.Context, c *serveConfig, log *slog.Logger, stdout io.Writer) (*wiring, error) {
	w := &wiring{}
	// The token's variable is read once and removed from the environment,
	// so no tool server inherits it whatever the admin's strip_env says.
	envToken := os.Getenv(auth.TokenEnv)
	os.Unsetenv(auth.TokenEnv)
	if envToken != "" && !c.standalone {
		log.Warn(auth.TokenEnv + " is ignored: it is for --standalone; with Jupyter, pages connect with Jupyter's own credentials")
	}
	jopts := jupyter.Options{RootDir: c.rootDir, Python: c.python, Logger: log}
	jopts.Self, _ = thisBinary()
	var gate bridge.Gate
	var watcher *jupyter.Watcher // Jupyter's configuration, loaded once before the gate is built
	if c.standalone {
		w.mode = "standalone"
	} else {
		w.mode = "jupyter"
		// Whichever way the parent server is found, the process that
		// started serve is jupyter-server-proxy's Jupyter server: serve
		// stops when it exits (runServe), also with --jupyter-url, where
		// the server asked may live elsewhere but a bridge left running
		// would still answer on a port nobody manages.
		w.parentPID = os.Getppid()
		parent, err := jupyter.FindParent(jupyter.ParentOptions{URL: c.jupyterURL})
		switch {
		case errors.Is(err, jupyter.ErrNoParent):
			return nil, fmt.Errorf("%w: start the bridge through jupyter-server-proxy (megane-jupyter-bridge install), pass --jupyter-url, or run it with --standalone", err)
		case err != nil:
			return nil, fmt.Errorf("find the parent Jupyter server: %w", err)
		}
		if jopts.RootDir == "" {
			jopts.RootDir = parent.RootDir
		}
		// The process that started serve is, under jupyter-server-proxy, the
		// Jupyter server itself: its interpreter is the Python whose
		// sys.prefix and traitlets Jupyter uses, wherever PATH points.
		jopts.ParentPID = w.parentPID
		jo := auth.JupyterOptions{Logger: log}
		if len(c.allowOrigins) > 0 || c.allowPat != "" {
			// Given on the command line (as the server may have been):
			// both replace Jupyter's configured pair. parseServeFlags
			// allows one --allow-origin here.
			if len(c.allowOrigins) > 0 {
				jo.AllowOrigin = c.allowOrigins[0]
			}
			jo.AllowOriginPat = c.allowPat
		} else {
			// Jupyter's own Origin settings, from its configuration files.
			watcher = jupyter.NewWatcher(jopts)
			cfg := watcher.Current(ctx)
			jo.AllowOrigin, jo.AllowOriginPat = cfg.AllowOrigin, cfg.AllowOriginPat
		}
		gate = auth.NewJupyterGate(parent, jo)
		log.Info("parent Jupyter server", "base", parent.Base.String(), "found_by", parent.Source, "owner", parent.Owner,
			"allow_origin", jo.AllowOrigin, "allow_origin_pat", jo.AllowOriginPat)
	}
	catalog, admin, closeCatalog, err := newCatalog(ctx, c, jopts, watcher)
	if err != nil {
		return nil, err
	}
	w.closers = append(w.closers, closeCatalog)
	w.opts = bridgeOptions(admin)
	w.opts.Catalog, w.opts.Logger, w.opts.BaseURL = catalog, log, c.baseURL
	w.opts.Page = statuspage.Handler(statuspage.Options{TokenFirst: c.standalone})
	keyPath := c.receiptKey
	if keyPath == "" {
		p, err := jupyter.ReceiptKeyPath(os.Getenv)
		if err != nil {
			return nil, fmt.Errorf("cannot locate the approval key: %w (or pass --receipt-key)", err)
		}
		keyPath = p
	}
	key, err := auth.LoadOrCreateKey(keyPath)
	if err != nil {
		return nil, fmt.Errorf("cannot read or create the approval key %s: %w", keyPath, err)
	}
	w.opts.Approvals = auth.NewReceipts(key, auth.ReceiptOptions{KeyFile: keyPath})

	if c.standalone {
		token, err := standaloneToken(c, envToken, log)
		if err != nil {
			return nil, err
		}
		w.opts.Gate = auth.NewStandalone(auth.StandaloneOptions{
			Token: token, AllowOrigins: c.allowOrigins, AllowHosts: c.allowHosts, Logger: log,
		})
		w.announce = func(addr net.Addr) {
			base := w.opts.BaseURL
			if base == "" {
				base = "/"
			}
			host := addr.String()
			if addr.Network() == "unix" {
				fmt.Fprintf(stdout, "megane-jupyter-bridge %s listening on unix socket %s\n", version, host)
				return
			}
			fmt.Fprintf(stdout, "megane-jupyter-bridge %s (standalone) is ready.\n", version)
			fmt.Fprintf(stdout, "  status page: http://%s%smegane/builder-tools/?token=%s\n", host, base, token)
			fmt.Fprintf(stdout, "  WebSocket:   ws://%s%smegane/builder-tools/ws?token=%s\n", host, base, token)
		}
		return w, nil
	}
	w.opts.Gate = gate
	return w, nil
}

// bridgeOptions are the bridge's options that the admin's settings decide,
// for serve and for doctor's probes alike, so that what doctor reports of a
// server is what serve's pages meet.
func bridgeOptions(admin jupyter.AdminSettings) bridge.Options {
	return bridge.Options{
		Version:                version,
		FrameLimit:             admin.FrameLimit,
		InboundLimit:           admin.InboundLimit,
		ResultLimit:            admin.ResultLimit,
		MemoryLimit:            admin.MemoryLimit,
		MaxCallsPerTab:         admin.MaxCallsPerTab,
		MaxCallsPerServer:      admin.MaxCallsPerServer,
		OutboundBytes:          admin.OutboundBytes,
		OutboundTotal:          admin.OutboundTotal,
		ChunkMemory:            admin.ChunkMemory,
		InboundMemory:          admin.InboundMemory,
		ResultMemory:           admin.ResultMemory,
		MaxPendingConnects:     admin.MaxPendingConnects,
		InitTimeout:            admin.InitTimeout,
		CallTimeoutMax:         admin.CallTimeoutMax,
		RestartBusyAfterCancel: admin.RestartBusyAfterCancel,
		ResumeGrace:            admin.ResumeGrace,
		MaxAway:                admin.MaxAway,
		MaxAwayPerUser:         admin.MaxAwayPerUser,
		AwayMemory:             admin.AwayMemory,
		StripEnv:               admin.StripEnv,

		MetricsPublicOnLoopback: admin.MetricsPublicOnLoopback,
		AuditFile:               admin.AuditFile,
		AuditMaxBytes:           admin.AuditMaxBytes,
		AuditKeep:               admin.AuditKeep,
	}
}

// standaloneToken returns the standalone token: --token (with a warning:
// a command line is readable by every local user), else --token-file, else
// envToken (MEGANE_BRIDGE_TOKEN's value), else a new random one. It logs
// where the token came from, never the token.
func standaloneToken(c *serveConfig, envToken string, log *slog.Logger) (string, error) {
	token, err := standaloneTokenFrom(c, envToken, log)
	if err != nil {
		return "", err
	}
	if n := len(token); n < minTokenLength {
		return "", fmt.Errorf("a standalone token of %d characters can be guessed: give one of at least %d (or none: the bridge makes 64 hex digits)", n, minTokenLength)
	}
	return token, nil
}

// minTokenLength is the shortest standalone token serve takes, from any
// source: the token lets anyone who has it run the configured tools.
const minTokenLength = 16

func standaloneTokenFrom(c *serveConfig, envToken string, log *slog.Logger) (string, error) {
	switch {
	case c.token != "":
		log.Warn("--token is visible to every local user in the process list (ps, /proc/<pid>/cmdline): use --token-file or " + auth.TokenEnv + " instead")
		return c.token, nil
	case c.tokenFile != "":
		token, created, err := auth.LoadOrCreateToken(c.tokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		log.Info("standalone token", "from", c.tokenFile, "created", created)
		return token, nil
	case envToken != "":
		log.Info("standalone token", "from", auth.TokenEnv)
		return envToken, nil
	}
	log.Info("standalone token", "from", "a new random one (printed below)")
	return auth.NewToken()
}

// newCatalog returns the servers' source: the --servers file, or Jupyter's
// configuration through watcher (a new one for jopts when nil); and what
// ends it (the watcher's load under way).
func newCatalog(ctx context.Context, c *serveConfig, jopts jupyter.Options, watcher *jupyter.Watcher) (bridge.Catalog, jupyter.AdminSettings, func(), error) {
	if c.serversFile != "" {
		cfg, err := jupyter.LoadServersFile(c.serversFile, jopts)
		if err != nil {
			return nil, jupyter.AdminSettings{}, nil, err
		}
		fc := &fileCatalog{path: c.serversFile, jopts: jopts, log: jopts.Logger, cfg: cfg}
		fc.stat, _ = os.Stat(c.serversFile)
		return fc, cfg.Admin, func() {}, nil
	}
	if watcher == nil {
		watcher = jupyter.NewWatcher(jopts)
	}
	cfg := watcher.Current(ctx)
	logPython(jopts.Logger, cfg, jopts.Python)
	return bridge.CatalogFunc(func(ctx context.Context) bridge.Snapshot {
		return watcher.Current(ctx).Snapshot()
	}), cfg.Admin, watcher.Close, nil
}

// logPython says which Python reads Jupyter's .py configuration and
// sys.prefix, and why that one; or that there is none. python is the
// --python value.
func logPython(log *slog.Logger, cfg *jupyter.Config, python string) {
	switch py := cfg.Python; {
	case py != nil:
		log.Info("Jupyter's Python", "path", py.Path, "found_by", py.Source, "sys_prefix", py.Prefix,
			"jupyter_server", py.JupyterServer, "traitlets", py.Traitlets)
	case python == "none":
		log.Info("Jupyter's Python is not used (--python none): .py configuration files are not read and {sys.prefix}/etc/jupyter is not searched")
	default:
		log.Warn("no Python for the Jupyter server: .py configuration files are not read and {sys.prefix}/etc/jupyter is not searched; pass --python", "error", cfg.PythonError)
	}
}

// fileCatalog serves a --servers file, read again whenever it changes, so
// edits take effect without a restart (as they do for Jupyter's
// configuration). The admin settings of the first read stay in force.
type fileCatalog struct {
	path  string
	jopts jupyter.Options
	log   *slog.Logger

	mu   sync.Mutex
	cfg  *jupyter.Config // guarded by mu
	stat os.FileInfo     // guarded by mu; of path when cfg was read
}

func (f *fileCatalog) Snapshot(ctx context.Context) bridge.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.path)
	if err == nil && (f.stat == nil || !st.ModTime().Equal(f.stat.ModTime()) || st.Size() != f.stat.Size() || !os.SameFile(st, f.stat)) {
		cfg, err := jupyter.LoadServersFile(f.path, f.jopts)
		if err != nil {
			f.log.Warn("cannot read the servers file again; keeping the last good one", "path", f.path, "error", err)
		} else {
			f.cfg, f.stat = cfg, st
		}
	}
	return f.cfg.Snapshot()
}
