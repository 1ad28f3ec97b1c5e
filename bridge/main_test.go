package bridge_test

import (
	"os"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"go.uber.org/goleak"
)

// TestMain lets this test binary be a keeper or a bridgetest tool server
// when the bridge re-executes it, and checks that no test leaves a
// goroutine behind.
func TestMain(m *testing.M) {
	bridge.RunKeeperIfRequested()
	if bridgetest.ServeFromEnv() {
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
