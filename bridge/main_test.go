package bridge

import (
	"os"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
	"github.com/megane-labs/megane-jupyter-bridge/child/childtest"
)

// The test binary doubles as the tool servers the relay tests run: TestMain
// turns it into a keeper (child.RunKeeperIfRequested), into a bridgetest
// server, or into the 2026-07-28-only go-sdk server (ModernServerEnv) before
// any test runs.
func TestMain(m *testing.M) {
	child.RunKeeperIfRequested()
	if bridgetest.ServeFromEnv() || serveModernFromEnv() {
		os.Exit(0)
	}
	childtest.VerifyTestMain(bridgetest.PeakReport{M: m, Pkg: "bridge"})
}
