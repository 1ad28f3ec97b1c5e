// Command megane-jupyter-bridge relays JupyterLab's Builder Tools menu to MCP
// tool servers. See README.md at the repository root.
//
// This package parses flags and wires the packages together; it holds no
// business logic.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
)

// version is the bridge's version, reported by tools:servers and --version.
const version = "0.1.0"

func main() {
	bridge.RunKeeperIfRequested()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitStatus(err, os.Stderr))
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
		fmt.Fprintln(stderr, "megane-jupyter-bridge:", err)
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
  serve        serve the Builder Tools WebSocket (started by jupyter-server-proxy, or --standalone)
  servers      print the tool servers the bridge would offer
  doctor       check a deployment and print one line per finding
  install      register the bridge with jupyter-server-proxy
  uninstall    remove that registration
  approvals    "approvals reset" revokes every confirmation receipt
  demo-tools   run the demo Builder tool server on stdin/stdout
  version      print the version
`

// run is the whole program; tests call it with their own arguments.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
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
	case "install":
		return runInstall(ctx, rest, stdout, stderr)
	case "uninstall":
		return runUninstall(ctx, rest, stdout, stderr)
	case "approvals":
		return runApprovals(ctx, rest, stdout, stderr)
	case "demo-tools":
		return runDemoTools(ctx, rest, stdin, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "megane-jupyter-bridge", version)
		return nil
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usageError{fmt.Sprintf("unknown command %q", cmd)}
}
