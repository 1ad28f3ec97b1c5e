package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"go.uber.org/goleak"
)

// asProgramEnv makes this test binary behave as the megane-jupyter-bridge
// program itself (its arguments are the program's), so tests can configure
// it as a tool server ("demo-tools") or run "serve" in a child process.
const asProgramEnv = "MEGANE_TEST_AS_PROGRAM"

func TestMain(m *testing.M) {
	bridge.RunKeeperIfRequested()
	if os.Getenv(asProgramEnv) != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(exitStatus(err, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}
