package bridge_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
)

// TestServerSpecNeverEncodesSecrets: a ServerSpec written as JSON or logged
// with slog names its env variables and headers but never carries their
// values (an entry's headers are its credentials).
func TestServerSpecNeverEncodesSecrets(t *testing.T) {
	specs := []bridge.ServerSpec{
		{Name: "lab", Transport: bridge.TransportHTTP, URL: "https://tools.example.org/mcp",
			Headers: map[string]string{"Authorization": "Bearer s3cret-header"}},
		{Name: "local", Transport: bridge.TransportStdio, Command: "/usr/bin/tool",
			Env: map[string]string{"API_KEY": "s3cret-env"}},
	}
	for _, spec := range specs {
		t.Run(spec.Name, func(t *testing.T) {
			var asJSON, asText strings.Builder
			slog.New(slog.NewJSONHandler(&asJSON, nil)).Info("x", "server", spec)
			slog.New(slog.NewTextHandler(&asText, nil)).Info("x", "server", spec)
			raw, err := json.Marshal(spec)
			if err != nil {
				t.Fatal(err)
			}
			outs := map[string]string{"json.Marshal": string(raw), "slog JSON": asJSON.String(), "slog text": asText.String()}
			for what, out := range outs {
				if strings.Contains(out, "s3cret") {
					t.Errorf("%s carries a secret value: %s", what, out)
				}
				if !strings.Contains(out, "Authorization") && !strings.Contains(out, "API_KEY") {
					t.Errorf("%s does not name the env variable or header: %s", what, out)
				}
			}
			for _, verb := range []string{"%v", "%+v", "%s"} {
				if out := fmt.Sprintf(verb, spec); strings.Contains(out, "s3cret") || !strings.Contains(out, spec.Name) {
					t.Errorf("fmt %s: %s", verb, out)
				}
			}
		})
	}
}
