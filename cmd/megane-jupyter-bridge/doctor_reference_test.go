package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
)

// TestDoctorStrictOnReferenceShapedServer: doctor --strict --spawn passes
// on a server shaped like the reference server megane-builder-tools (its
// three tools' definitions recorded from it, its recorded polymer_chain
// result for each, required arguments validated as its SDK does, and a
// synchronous worker behind one lock), and fails, naming the CPU after the
// cancel, when that worker ignores a cancel, as the real one's does.
func TestDoctorStrictOnReferenceShapedServer(t *testing.T) {
	if !child.CPUMeasured() {
		t.Skip("the CPU time of processes is not measured on this OS (macOS): check warns that it cannot tell whether a cancelled call stopped")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := bridgetest.FixtureDir()
	call := filepath.Join(dir, "call-polymer_chain.json")
	if _, err := os.Stat(call); err != nil {
		jupytertest.Need(t, "the megane-reference fixtures (shared/ beside the checkout)", err)
	}
	for _, tc := range []struct {
		name   string
		ignore bool
	}{{"stops a cancelled call", false}, {"keeps computing a cancelled call", true}} {
		t.Run(tc.name, func(t *testing.T) {
			mode := bridgetest.Mode{Name: "megane-builder-tools", FixtureList: filepath.Join(dir, "tools-list.json"),
				FixtureCalls:    map[string]string{"polymer_chain": call, "liquid_box": call, "solvate": call},
				FixtureRequired: true,
				FixtureWork:     &bridgetest.FixtureWork{Arg: "length", MsPerUnit: 40, IgnoreCancel: tc.ignore}}
			spec, _ := json.Marshal(mode)
			servers, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"megane-builder-tools": map[string]any{
				"command": exe, "args": []string{"-test.run=^$"}, "env": map[string]string{bridgetest.EnvVar: string(spec)}}}})
			file := filepath.Join(t.TempDir(), "servers.json")
			if err := os.WriteFile(file, servers, 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv(asProgramEnv, "1")
			out, _, err := runCLI(t, "doctor", "--strict", "--spawn", "--standalone", "--servers", file, "--timeout", "1m")
			if !tc.ignore {
				if err != nil || strings.Contains(out, "warning:") || strings.Contains(out, "error:") {
					t.Fatalf("doctor --strict on the reference-shaped server: %v\n%s", err, out)
				}
				return
			}
			if err == nil || !strings.Contains(out, "error:   server megane-builder-tools: polymer_chain: still working after a cancel: the server's processes used ") || !strings.Contains(out, "CPU-seconds") {
				t.Fatalf("doctor --strict on a server that keeps computing a cancelled call: %v, want it to fail naming the CPU:\n%s", err, out)
			}
		})
	}
}
