package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/auth"
	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/child"
	"github.com/megane-labs/megane-jupyter-bridge/cmd/internal/demotools"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// serveConfig is what the serve flags say.
type serveConfig struct {
	port         int
	host         string
	unixSocket   string
	baseURL      string
	standalone   bool
	token        string
	tokenFile    string
	allowOrigins stringList
	allowPat     string
	allowHosts   stringList
	serversFile  string
	logLevel     string
	readyFile    string
	jupyterURL   string
	rootDir      string
	python       string
	receiptKey   string
}

// serveHelp is serve --help.
var serveHelp = commandHelp{
	usage: "serve [flags]",
	about: `Serve the Builder Tools WebSocket ({base_url}megane/builder-tools/ws), the status
page and tool runner beside it, and builder-tools-client.js, the module pages
use to reach it. jupyter-server-proxy starts it with the Jupyter server (see
install); --standalone runs it without Jupyter, as make run does:
  PATH=bin:$PATH bin/megane-jupyter-bridge serve --standalone --port 8765 \
      --servers etc/demo-servers.json --token-file <Jupyter data dir>/megane-jupyter-bridge/standalone.token`,
	groups: []flagGroup{
		{"Where it listens (both modes)", []string{"port", "host", "unix-socket", "base-url"}},
		{"Standalone (no Jupyter: make run)", []string{"standalone", "token-file", "token", "allow-host", "allow-origin"}},
		{"With Jupyter (what jupyter-server-proxy starts)", []string{"jupyter-url", "allow-origin-pat", "root-dir", "python"}},
		{"Admin", []string{"servers", "receipt-key", "log-level", "ready-file"}},
	},
}

func parseServeFlags(args []string, stdout, stderr io.Writer) (*serveConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c := &serveConfig{}
	fs.IntVar(&c.port, "port", 0, "TCP port to listen on, on 127.0.0.1 and ::1 (0: pick a free one)")
	fs.StringVar(&c.host, "host", "", "listen on this address only (default: 127.0.0.1 and ::1)")
	fs.StringVar(&c.unixSocket, "unix-socket", "", "listen on this unix socket instead of a TCP port")
	fs.StringVar(&c.baseURL, "base-url", "/", "the Jupyter base URL the bridge is served under")
	fs.BoolVar(&c.standalone, "standalone", false, "run without Jupyter: require --token (or a generated one) and check Origin")
	fs.StringVar(&c.token, "token", "", "standalone token; every local user can read it in the process list, so prefer --token-file or "+auth.TokenEnv+" (default: "+auth.TokenEnv+", else a random one, printed)")
	fs.StringVar(&c.tokenFile, "token-file", "", "standalone: read the token from this file, which must be readable by its owner only (created with a random token, mode 0600, if missing)")
	fs.Var(&c.allowOrigins, "allow-origin", "an extra Origin to accept (standalone: repeatable; with Jupyter: once, its ServerApp.allow_origin, replacing the configured allow_origin and allow_origin_pat)")
	fs.StringVar(&c.allowPat, "allow-origin-pat", "", "with Jupyter: its ServerApp.allow_origin_pat, a regular expression for the Origins to accept (replaces the configured allow_origin and allow_origin_pat, like --allow-origin)")
	fs.Var(&c.allowHosts, "allow-host", "standalone: an extra Host to accept besides loopback (repeatable)")
	fs.StringVar(&c.serversFile, "servers", "", "read servers from this {\"mcpServers\": …} JSON file instead of Jupyter's configuration")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.readyFile, "ready-file", "", "write the listening address to this file once ready (for scripts and tests)")
	fs.StringVar(&c.rootDir, "root-dir", "", "the Jupyter server's root_dir, for ${workspaceFolder} (default: from its runtime file)")
	fs.StringVar(&c.python, "python", "", "the Jupyter server's Python, to read .py configuration (default: the parent Jupyter server's own, else searched on PATH; \"none\" to skip)")
	fs.StringVar(&c.receiptKey, "receipt-key", "", "the confirmation receipts' signing key (default: <Jupyter data dir>/megane-jupyter-bridge/receipt.key)")
	fs.StringVar(&c.jupyterURL, "jupyter-url", "", "the parent Jupyter server's URL (default: found from jpserver-<ppid>.json or JUPYTERHUB_SERVICE_URL)")
	if err := parseFlags(fs, args, serveHelp, stdout, stderr); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usageError{fmt.Sprintf("serve: unexpected argument %q", fs.Arg(0))}
	}
	// With Jupyter, --allow-origin stands for the server's
	// ServerApp.allow_origin, which holds one value, and Jupyter itself is
	// asked about every Origin: a second one would be refused by Jupyter
	// anyway, so it is an error rather than silently dropped. Several
	// Origins are a pattern, as in Jupyter.
	switch {
	case c.standalone && c.allowPat != "":
		return nil, usageError{"--allow-origin-pat is for Jupyter mode; with --standalone give each Origin with --allow-origin"}
	case !c.standalone && len(c.allowHosts) > 0:
		return nil, usageError{"--allow-host is for --standalone: with Jupyter, the Jupyter server checks the Host (ServerApp.allow_remote_access, ServerApp.local_hostnames)"}
	case !c.standalone && c.token != "":
		return nil, usageError{"--token is for --standalone: with Jupyter, pages connect with Jupyter's own credentials"}
	case !c.standalone && c.tokenFile != "":
		return nil, usageError{"--token-file is for --standalone: with Jupyter, pages connect with Jupyter's own credentials"}
	case c.token != "" && c.tokenFile != "":
		return nil, usageError{"give the token once: --token or --token-file"}
	case !c.standalone && len(c.allowOrigins) > 1:
		return nil, usageError{fmt.Sprintf("--allow-origin is given %d times, but with Jupyter it stands for the server's ServerApp.allow_origin, one Origin or \"*\": give it once, or give --allow-origin-pat a regular expression that matches them all (as the server's ServerApp.allow_origin_pat must)", len(c.allowOrigins))}
	case c.allowPat != "":
		if _, err := regexp.Compile(c.allowPat); err != nil {
			return nil, usageError{fmt.Sprintf("--allow-origin-pat: %v", err)}
		}
	}
	return c, nil
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError{fmt.Sprintf("--log-level: %v", err)}
	}
	return slog.New(auth.NewRedactingHandler(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))), nil
}

// parentWatch is how serve, in Jupyter mode, watches the process that
// started it (child.WatchParent; the zero value polls every 250 ms and, on
// Linux, asks for the kernel's notice too). Only TestMain changes it, before
// the program runs, to show the poll alone is enough.
var parentWatch child.WatchOptions

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseServeFlags(args, stdout, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, c.logLevel)
	if err != nil {
		return err
	}
	wiring, err := wire(ctx, c, log, stdout)
	if err != nil {
		return err
	}
	defer wiring.close()

	// In Jupyter mode serve ends, as on SIGTERM, when the process that
	// started it exits: orphaned, it would go on asking whatever answers
	// at the dead server's address. The watch ends before runServe returns.
	parentGone := make(chan error, 1)
	if wiring.parentPID > 0 {
		watchCtx, stopWatch := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			if err := child.WatchParent(watchCtx, wiring.parentPID, parentWatch); err != nil {
				parentGone <- err
			}
		}()
		defer func() { stopWatch(); <-watched }()
	}

	b := bridge.New(wiring.opts)
	if l := b.MemoryLimit(); l > 0 {
		// The collector works harder near the ceiling; the bridge refuses
		// new work above 90% of it. The runtime's limit is soft (it
		// overshoots while the collector catches up), so it is set 1/16
		// below the ceiling: the 5-minute mixed attack's peak RSS reached
		// 992 MiB of 1024 with the limit at the ceiling.
		debug.SetMemoryLimit(l - l/16)
	}
	listeners, err := listen(c)
	if err != nil {
		b.Close()
		return err
	}
	limits := newConnLimiter(maxPending, maxConns)
	for i, l := range listeners {
		listeners[i] = limits.wrap(l)
	}
	srv := &http.Server{
		Handler:           b,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		ConnState:         limits.track,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	var wg sync.WaitGroup
	serveErr := make(chan error, len(listeners))
	for _, l := range listeners {
		wg.Add(1)
		go func(l net.Listener) {
			defer wg.Done()
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				serveErr <- err
			}
		}(l)
	}
	addr := listeners[0].Addr().String()
	log.Info("listening", "addr", addr, "base_url", wiring.opts.BaseURL, "mode", wiring.mode)
	if wiring.announce != nil {
		wiring.announce(listeners[0].Addr())
	}
	if c.readyFile != "" {
		if err := os.WriteFile(c.readyFile, []byte(addr+"\n"), 0o600); err != nil {
			log.Warn("cannot write the ready file", "path", c.readyFile, "error", err)
		}
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-parentGone:
		log.Warn("shutting down: the Jupyter server is gone", "reason", err)
		runErr = fmt.Errorf("%w: stopped", err)
	case runErr = <-serveErr:
	}
	// Stop taking new sockets, then close every tab (their calls are
	// answered) and stop every server. run waits for all of it, so nothing
	// it started outlives it: bridge.Close is bounded by the bridge's own
	// stop steps (a stdio server's group is SIGKILLed a few seconds after
	// it is asked to stop; an HTTP session's DELETE times out). A shutdown
	// slower than shutdownWarn is only reported; main bounds the whole
	// (exitBound).
	closed := make(chan struct{})
	go func() {
		b.Close()
		close(closed)
	}()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownWarn)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	select {
	case <-closed:
	case <-shutdownCtx.Done():
		log.Warn("shutdown is taking long: still stopping tool servers", "after", shutdownWarn)
		<-closed
	}
	srv.Close()
	wg.Wait()
	return runErr
}

// shutdownWarn is how long serve's shutdown may take before it says so.
const shutdownWarn = 10 * time.Second

// listen opens the listeners: a unix socket, or the TCP port on 127.0.0.1
// and ::1 (::1 is skipped where the machine has no IPv6 loopback).
func listen(c *serveConfig) ([]net.Listener, error) {
	if c.unixSocket != "" {
		_ = os.Remove(c.unixSocket)
		l, err := net.Listen("unix", c.unixSocket)
		if err != nil {
			return nil, fmt.Errorf("cannot listen on %s: %w", c.unixSocket, err)
		}
		_ = os.Chmod(c.unixSocket, 0o600)
		return []net.Listener{l}, nil
	}
	if c.host != "" {
		l, err := net.Listen("tcp", net.JoinHostPort(c.host, strconv.Itoa(c.port)))
		if err != nil {
			return nil, fmt.Errorf("cannot listen on %s port %d: %w", c.host, c.port, err)
		}
		return []net.Listener{l}, nil
	}
	l4, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)))
	if err != nil {
		return nil, fmt.Errorf("cannot listen on 127.0.0.1 port %d: %w (is another program using it?)", c.port, err)
	}
	port := l4.Addr().(*net.TCPAddr).Port
	ls := []net.Listener{l4}
	if l6, err := net.Listen("tcp", net.JoinHostPort("::1", strconv.Itoa(port))); err == nil {
		ls = append(ls, l6)
	}
	return ls, nil
}

func runDemoTools(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo-tools", flag.ContinueOnError)
	if err := parseFlags(fs, args, demoToolsHelp, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{"demo-tools takes no arguments"}
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	return demotools.RunWithOptions(ctx, stdin, stdout, demotools.Options{Version: version, Logger: log})
}
