package main

import (
	"os"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
	"go.uber.org/goleak"
)

// asProgramEnv makes this test binary behave as the megane-jupyter-bridge
// program itself (its arguments are the program's), so tests can configure
// it as a tool server ("demo-tools") or run "serve" in a child process.
const asProgramEnv = "MEGANE_TEST_AS_PROGRAM"

// exitBoundEnv, in the program's environment, replaces exitBound (a Go
// duration), so a test can reach it without waiting 30 s.
const exitBoundEnv = "MEGANE_TEST_EXIT_BOUND"

// noDeathNoticeEnv, in the program's environment, turns off the kernel's
// notice of the parent's death (child.WatchOptions.NoNotice), so a test can
// exercise the poll alone.
const noDeathNoticeEnv = "MEGANE_TEST_NO_DEATH_NOTICE"

func TestMain(m *testing.M) {
	child.RunKeeperIfRequested()
	if spec := os.Getenv(idleConnsEnv); spec != "" {
		os.Exit(holdIdleConnections(spec))
	}
	if spec := os.Getenv(legitPageEnv); spec != "" {
		os.Exit(legitPage(spec))
	}
	if fixture := os.Getenv(plainWSEnv); fixture != "" {
		os.Exit(plainWS(fixture))
	}
	if os.Getenv(asProgramEnv) != "" {
		if os.Getenv(noDeathNoticeEnv) != "" {
			parentWatch.NoNotice = true
		}
		bound := exitBound
		if d, err := time.ParseDuration(os.Getenv(exitBoundEnv)); err == nil {
			bound = d
		}
		os.Exit(program(os.Args[1:], bound))
	}
	goleak.VerifyTestMain(bridgetest.PeakReport{M: m, Pkg: "cmd/megane-jupyter-bridge"})
}
