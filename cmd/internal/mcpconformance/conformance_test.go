package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
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

// lines are the suite's release lines CI runs, each installed in .ci/node:
// the 0.1 line tests revisions up to 2025-11-25, the 0.2 line adds
// 2026-07-28 and runs each scenario at every revision it lists.
var lines = []struct {
	name, pkg string
	// perRevision: run a scenario once per revision it lists
	// (--spec-version); the 0.1 line runs each once at its default.
	perRevision bool
}{
	{"0.1", "@modelcontextprotocol/conformance", false},
	{"0.2", "conformance-next", true},
}

// suite returns the node (>= 22) and the conformance CLI of pkg installed
// in .ci/node (.ci/run installs both; `npm ci --prefix .ci/node` here).
func suite(t *testing.T, pkg string) (node, cli string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", ".ci", "node", "node_modules")
	node = filepath.Join(dir, "node", "bin", "node")
	cli = filepath.Join(dir, pkg, "dist", "index.js")
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

// listed is a client scenario of the suite's list, with the protocol
// revisions (dates) it applies to.
type listed struct {
	name      string
	revisions []string
}

// clientScenarios reads `conformance list`: "  - name [rev,rev]" lines
// under "Client scenarios", up to the next heading.
func clientScenarios(t *testing.T, node, cli string) []listed {
	t.Helper()
	out, err := exec.Command(node, cli, "list").CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list: %v\n%s", err, out)
	}
	_, part, ok := strings.Cut(string(out), "Client scenarios")
	if !ok {
		t.Fatalf("conformance list has no client scenarios:\n%s", out)
	}
	var got []listed
	for _, line := range strings.Split(part, "\n")[1:] {
		m := regexp.MustCompile(`^\s*-\s+(\S+)(?:\s+\[([^\]]*)\])?`).FindStringSubmatch(line)
		if m == nil {
			if strings.TrimSpace(line) != "" {
				break // the next heading
			}
			continue
		}
		l := listed{name: m[1]}
		for _, r := range strings.Split(m[2], ",") {
			if regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`).MatchString(r) && r >= "2025-06-18" {
				l.revisions = append(l.revisions, r)
			}
		}
		got = append(got, l)
	}
	if len(got) == 0 {
		t.Fatalf("conformance list names no client scenario:\n%s", out)
	}
	return got
}

// TestConformanceClientScenarios runs the MCP conformance suite's client
// scenarios, of both release lines, against the bridge's MCP client
// (through this package's adapter, a real Bridge driven as a page drives
// it): every applicable scenario passes at every revision it lists with no
// failed check and no warning, the adapter got from the bridge everything
// its plan expects, and every client scenario the suite has is either
// applicable or not applicable with a reason.
func TestConformanceClientScenarios(t *testing.T) {
	for name := range plans {
		if why := NotApplicable(name); why != "" {
			t.Errorf("%s has a plan and is also not applicable (%s)", name, why)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range lines {
		t.Run(line.name, func(t *testing.T) {
			node, cli := suite(t, line.pkg)
			if v, err := exec.Command(node, cli, "--version").Output(); err == nil {
				t.Logf("%s %s", line.pkg, strings.TrimSpace(string(v)))
			}
			scenarios := clientScenarios(t, node, cli)
			seen := map[string]bool{}
			skipped := map[string][]string{} // by reason
			for _, sc := range scenarios {
				seen[sc.name] = true
				if _, ok := plans[sc.name]; ok {
					continue
				}
				if why := NotApplicable(sc.name); why != "" {
					skipped[why] = append(skipped[why], sc.name)
					continue
				}
				t.Errorf("the suite has a client scenario %q that is neither in the adapter's plans nor not applicable: decide, and say so in README", sc.name)
			}
			for why, names := range skipped {
				t.Logf("not applicable (%s): %s", why, strings.Join(names, ", "))
			}
			if !seen["initialize"] || !seen["tools_call"] {
				t.Errorf("the suite's list lacks initialize or tools_call: %v", scenarios)
			}
			for _, sc := range scenarios {
				if _, ok := plans[sc.name]; !ok {
					continue
				}
				revs := sc.revisions
				if !line.perRevision || len(revs) == 0 {
					revs = []string{""}
				}
				for _, rev := range revs {
					name := sc.name
					if rev != "" {
						name += "@" + rev
					}
					t.Run(name, func(t *testing.T) {
						runScenario(t, node, cli, self, sc.name, rev)
					})
				}
			}
		})
	}
}

// runScenario runs one client scenario (at revision rev, if not empty)
// with the adapter as the client.
func runScenario(t *testing.T, node, cli, self, scenario, rev string) {
	dir := t.TempDir()
	args := []string{cli, "client", "--command", self, "--scenario", scenario, "--output-dir", filepath.Join(dir, "results")}
	if rev != "" {
		args = append(args, "--spec-version", rev)
	}
	cmd := exec.Command(node, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), asClientEnv+"=1", "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("conformance client --scenario %s: %v\n%s", scenario, err, out)
	}
	if strings.Contains(string(out), "SKIPPED: scenario") {
		t.Fatalf("the suite skipped the scenario:\n%s", out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "results", "*", "checks.json"))
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
	// The suite may tolerate a client that exits non-zero (scenarios where
	// a client's error is allowed): the adapter's own verdict is its last
	// line.
	stdout, _ := os.ReadFile(filepath.Join(filepath.Dir(files[0]), "stdout.txt"))
	if !strings.Contains(string(stdout), "plan done: "+scenario) {
		stderr, _ := os.ReadFile(filepath.Join(filepath.Dir(files[0]), "stderr.txt"))
		t.Errorf("the adapter did not finish its plan:\n%s\n%s", stdout, lastLines(string(stderr), 20))
	}
	t.Logf("%d checks passed; %s", passed, lastLines(string(stdout), 1))
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], "\n")
}
