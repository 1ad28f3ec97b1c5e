package bridge_test

import (
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// TestAdvertisesNoClientCapabilities: initialize advertises no client
// capability: the bridge implements none (go-sdk's default client
// advertised roots with listChanged, contradicting the docs; issue 13).
func TestAdvertisesNoClientCapabilities(t *testing.T) {
	j := journal(t)
	spec := fakeServer(t, "fake", bridgetest.Mode{Journal: j})
	h := newHarness(t, bridge.Options{}, spec)
	ctx := testCtx(t, 30*time.Second)
	connect(t, ctx, h.page(ctx), 1, spec)
	entries, err := bridgetest.ReadJournal(j)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Method != "initialize" {
			continue
		}
		if caps := strings.TrimSpace(string(e.Capabilities)); caps != "{}" {
			t.Fatalf("initialize advertised capabilities %s, want {}", caps)
		}
		return
	}
	t.Fatal("the server saw no initialize")
}
