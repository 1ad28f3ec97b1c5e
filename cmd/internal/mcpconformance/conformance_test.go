package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// asClientEnv makes the test binary run as the adapter: the suite launches
// it as its client command.
const asClientEnv = "MCPCONFORMANCE_AS_CLIENT"

func TestMain(m *testing.M) {
	if os.Getenv(asClientEnv) == "1" {
		os.Exit(adapter())
	}
	os.Exit(m.Run())
}

// applicable are the client scenarios of the suite that the bridge must
// pass. notApplicable are the others, with the reason (README "MCP
// conformance" lists them too); auth/* scenarios are all OAuth flows.
var (
	applicable    = []string{"initialize", "tools_call", "sse-retry"}
	notApplicable = map[string]string{
		"elicitation-sep1034-client-defaults": "the bridge does not offer elicitation: the Builder page cannot answer a server's questions in the middle of a call",
	}
)

const authReason = "OAuth authorization flows: the bridge does not do OAuth; an entry's headers carry its credentials"

// suite returns the node (>= 22) and the conformance CLI installed in
// .ci/node (.ci/run installs both; `npm ci --prefix .ci/node` here).
func suite(t *testing.T) (node, cli string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", ".ci", "node", "node_modules")
	node = filepath.Join(dir, "node", "bin", "node")
	cli = filepath.Join(dir, "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, f := range []string{node, cli} {
		if _, err := os.Stat(f); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is missing; .ci/run must install it (npm ci --prefix .ci/node)", f)
			}
			t.Skipf("%s is not installed (npm ci --prefix .ci/node); skipping", f)
		}
	}
	return node, cli
}

// TestConformanceClientScenarios runs the MCP conformance suite's client
// scenarios against the bridge's MCP client (through this package's
// adapter, a real Bridge driven as a page drives it): every applicable
// scenario passes with no failed check, and every client scenario the suite
// has is either applicable or listed as not applicable with a reason.
func TestConformanceClientScenarios(t *testing.T) {
	node, cli := suite(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command(node, cli, "list").CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list: %v\n%s", err, out)
	}
	_, clientPart, ok := strings.Cut(string(out), "Client scenarios")
	if !ok {
		t.Fatalf("conformance list has no client scenarios:\n%s", out)
	}
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^\s*-\s+(\S+)`).FindAllStringSubmatch(clientPart, -1) {
		name := m[1]
		listed = append(listed, name)
		switch {
		case slices.Contains(applicable, name):
			continue
		case notApplicable[name] != "":
			t.Logf("%s: not applicable: %s", name, notApplicable[name])
			continue
		case strings.HasPrefix(name, "auth/"):
			t.Logf("%s: not applicable: %s", name, authReason)
			continue
		}
		t.Errorf("the suite has a client scenario %q that is neither applicable nor listed as not applicable: decide, and say so in README", name)
	}
	for _, name := range applicable {
		if !slices.Contains(listed, name) {
			t.Errorf("the suite no longer has the client scenario %q", name)
		}
	}

	for _, scenario := range applicable {
		t.Run(scenario, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(node, cli, "client", "--command", self, "--scenario", scenario, "--output-dir", filepath.Join(dir, "results"))
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), asClientEnv+"=1", "NO_COLOR=1")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("conformance client --scenario %s: %v\n%s", scenario, err, out)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "results", "*checks.json"))
			if len(files) == 0 {
				files, _ = filepath.Glob(filepath.Join(dir, "results", "*", "checks.json"))
			}
			if len(files) != 1 {
				t.Fatalf("expected one checks.json, found %v\n%s", files, out)
			}
			b, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			var checks []struct {
				ID, Status, ErrorMessage string
			}
			if err := json.Unmarshal(b, &checks); err != nil {
				t.Fatalf("checks.json: %v", err)
			}
			passed := 0
			for _, c := range checks {
				switch c.Status {
				case "SUCCESS":
					passed++
				case "FAILURE", "WARNING":
					t.Errorf("check %s: %s: %s", c.ID, c.Status, c.ErrorMessage)
				}
			}
			if passed == 0 {
				t.Errorf("no check passed:\n%s", out)
			}
			t.Logf("%s: %d checks passed", scenario, passed)
		})
	}
}
