package bridge_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// TestProbeMeetsWhatAPageMeets: doctor's probe of a server reports what a
// page's tools:connect gets from the same bridge: the revision, the
// server's serverInfo, the number of tools, and for a server that cannot
// start the same one line.
func TestProbeMeetsWhatAPageMeets(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode bridgetest.Mode
	}{
		{"works", bridgetest.Mode{}},
		{"dies", bridgetest.Mode{ExitBeforeInit: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := fakeServer(t, tc.name, tc.mode)
			h := newHarness(t, bridge.Options{}, spec)
			ctx := testCtx(t, 30*time.Second)
			probe, perr := h.b.Probe(ctx, spec)
			r, err := h.page(ctx).Request(ctx, map[string]any{"type": "tools:connect", "id": 1, "server": spec.Name,
				"fingerprint": spec.Fingerprint, "confirmed": true})
			if err != nil {
				t.Fatal(err)
			}
			if r.Error != nil {
				if perr == nil || perr.Error() != r.Error.Message {
					t.Fatalf("the page was told %q, the probe %v", r.Error.Message, perr)
				}
				return
			}
			if perr != nil {
				t.Fatalf("probe: %v; the page connected", perr)
			}
			var tools []json.RawMessage
			if err := json.Unmarshal(r.Fields["tools"], &tools); err != nil {
				t.Fatal(err)
			}
			var version string
			json.Unmarshal(r.Fields["protocolVersion"], &version)
			if probe.Tools != len(tools) || probe.Tools == 0 || string(probe.ServerInfo) != string(r.Fields["serverInfo"]) ||
				probe.ProtocolVersion == "" || (version != "" && version != probe.ProtocolVersion) {
				t.Fatalf("probe %+v; the page got %d tools, serverInfo %s, protocolVersion %q", probe, len(tools), r.Fields["serverInfo"], version)
			}
		})
	}
}
