// Command megane-jupyter-bridge relays JupyterLab's Builder Tools menu to MCP
// tool servers. See README.md at the repository root.
//
// This package parses flags and wires the packages together; it never holds
// the logic of the relay, of authentication or of supervision, which live in
// bridge, auth and child.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/auth"
	"github.com/megane-labs/megane-jupyter-bridge/child"
)

// version is the bridge's version, reported by tools:servers and --version,
// and the version of the wheels make wheels writes (a PEP 440 version).
const version = "0.1.0"

// exitBound is how long the program may take to stop after SIGTERM or
// SIGINT. run stops everything it started and waits for all of it, and
// bridge.Close is itself bounded (a stdio server's process group is
// SIGKILLed a few seconds after it is asked to stop; an HTTP session's
// DELETE has a timeout), so this bound is reached only through a bug.
const exitBound = 30 * time.Second

func main() {
	child.RunKeeperIfRequested()
	os.Exit(program(os.Args[1:], exitBound))
}

// program is the program as main runs it, with the process's standard
// streams: it runs run until it returns, cancelling its context at the
// first SIGINT or SIGTERM, and returns the exit status. If run has not
// returned bound after that signal, or a second one arrives, program
// returns 1 at once without waiting for it: its caller must then exit the
// process (main does), which is the only way run's goroutine is left
// behind. The tool servers still stopping do not survive that exit: each
// one's keeper SIGKILLs its process group when the bridge's end of the
// lifeline closes.
func program(args []string, bound time.Duration) int {
	// On Linux what a tool server leaves behind after killing its keeper
	// comes to this process, which kills it (child.Reaper). Here rather
	// than in run: in-process tests must not make their test binary a
	// subreaper.
	reaper, err := child.StartReaper(child.ReaperOptions{Logger: slog.New(auth.NewRedactingHandler(slog.NewTextHandler(os.Stderr, nil)))})
	if err != nil {
		fmt.Fprintf(os.Stderr, "megane-jupyter-bridge: cannot become a child subreaper (%v): a tool server that kills its keeper may leave processes behind\n", err)
	}
	defer reaper.Close()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	result := make(chan error, 1)
	go func() { result <- run(ctx, args, os.Stdin, os.Stdout, os.Stderr) }()
	var deadline <-chan time.Time
	for {
		select {
		case err := <-result:
			return exitStatus(err, os.Stderr)
		case <-sigs:
			if deadline == nil {
				cancel()
				deadline = time.After(bound)
				continue
			}
			fmt.Fprintln(os.Stderr, "megane-jupyter-bridge: signalled again while stopping: exiting now; the tool servers still stopping are killed")
			return 1
		case <-deadline:
			fmt.Fprintf(os.Stderr, "megane-jupyter-bridge: did not stop within %s of the signal: exiting now; the tool servers still stopping are killed\n", bound)
			return 1
		}
	}
}

// exitStatus prints run's error for the person, as one line on stderr
// (nothing for a bare usage error: the usage text is already printed), and
// returns the exit status: 0, 2 for a command-line mistake, else 1.
func exitStatus(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var u usageError
	if !errors.As(err, &u) || u.msg != "" {
		fmt.Fprintln(stderr, "megane-jupyter-bridge:", termSafe(err.Error()))
	}
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

// usageError is a command-line mistake: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

const usage = `usage: megane-jupyter-bridge <command> [flags]

commands:
  serve        serve the Builder Tools WebSocket and the status page (started by
               jupyter-server-proxy, or --standalone without Jupyter: make run)
  servers      print the tool servers the bridge would offer
  doctor       check a deployment and print one line per finding
  check        check tool servers against the Builder Tool Contract:
               check [--json] [NAME... | -- COMMAND [ARG...] | URL]
  install      register the bridge with jupyter-server-proxy
  uninstall    remove that registration
  approvals    "approvals reset" revokes every confirmation receipt
  prefetch-default
               install the default reference server where it starts offline
  demo-tools   the demo Builder tool server (MCP on stdin/stdout), which the
               bridge starts for make run; not run by hand
  version      print the version, the commit and the Go version

megane-jupyter-bridge <command> --help describes a command and its flags.
`

// run is the whole program; tests call it with their own arguments.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	err := dispatch(ctx, args, stdin, stdout, stderr)
	if errors.Is(err, errHelpShown) {
		return nil
	}
	return err
}

func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError{}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return runServe(ctx, rest, stdout, stderr)
	case "servers":
		return runServers(ctx, rest, stdout, stderr)
	case "doctor":
		return runDoctor(ctx, rest, stdout, stderr)
	case "check":
		return runCheck(ctx, rest, stdout, stderr)
	case "install":
		return runInstall(ctx, rest, stdout, stderr)
	case "uninstall":
		return runUninstall(ctx, rest, stdout, stderr)
	case "approvals":
		return runApprovals(ctx, rest, stdout, stderr)
	case "prefetch-default":
		return runPrefetch(ctx, rest, stdout, stderr)
	case "demo-tools":
		return runDemoTools(ctx, rest, stdin, stdout, stderr)
	case "version", "--version", "-version":
		if len(args) > 1 && (args[1] == "-h" || args[1] == "--help" || args[1] == "-help") {
			fmt.Fprintln(stdout, "usage: megane-jupyter-bridge version\n\nPrint the bridge's version, the commit it was built from and the Go version.")
			return nil
		}
		printVersion(stdout)
		return nil
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usageError{fmt.Sprintf("unknown command %q", cmd)}
}
