package bridge_test

import (
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
)

// TestMissingCommandNamesTheFix: a connect to a server whose command is
// not on PATH fails with one line that names the command and the fix (the
// entry's own install hint when the configuration gave one, as it does for
// the default server's uvx), never the bridge's whole PATH.
func TestMissingCommandNamesTheFix(t *testing.T) {
	t.Setenv("PATH", "/usr/local/sbin/nothing-here:/usr/bin:/bin:/some/very/long/directory/that/says/nothing")
	hint := "megane-builder-tools cannot start: neither megane-builder-tools nor uvx was found on PATH or in ~/.local/bin; install uv"
	for _, tc := range []struct {
		name     string
		warnings []string
		want     string
	}{
		{"no hint", nil, `"uvx-not-installed-here" was not found on the server's PATH: install it, or give the entry the command's absolute path`},
		{"the entry's hint", []string{hint}, `"uvx-not-installed-here" was not found on the server's PATH: ` + hint},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := bridge.ServerSpec{Name: "lab", Transport: bridge.TransportStdio, Command: "uvx-not-installed-here",
				Source: "test", Fingerprint: "sha256:missing", Warnings: tc.warnings}
			h := newHarness(t, bridge.Options{}, spec)
			ctx := testCtx(t, 30*time.Second)
			p := h.page(ctx)
			r, err := p.Request(ctx, map[string]any{"type": "tools:connect", "id": 1, "server": "lab", "fingerprint": spec.Fingerprint, "confirmed": true})
			if err != nil {
				t.Fatal(err)
			}
			mustErr(t, r, bridge.CodeServerFailed)
			if !strings.Contains(r.Error.Message, tc.want) || strings.Contains(r.Error.Message, "/some/very/long") {
				t.Fatalf("connect failed with %q; want it to contain %q and not the PATH", r.Error.Message, tc.want)
			}
		})
	}
}
