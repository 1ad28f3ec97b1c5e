package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter/wheel"
)

// recipe is the part of recipe/recipe.yaml (conda-forge's v1 format) the
// tests read; unknown keys are refused, so a misspelt one fails.
type recipe struct {
	Context map[string]string `yaml:"context"`
	Package struct {
		Name    string `yaml:"name"`
		Version string `yaml:"version"`
	} `yaml:"package"`
	Source struct {
		URL    string `yaml:"url"`
		SHA256 string `yaml:"sha256"`
	} `yaml:"source"`
	Build struct {
		Number *int     `yaml:"number"`
		Skip   []string `yaml:"skip"`
		Script []string `yaml:"script"`
	} `yaml:"build"`
	Requirements struct {
		Build []string `yaml:"build"`
		Host  []string `yaml:"host"`
		Run   []any    `yaml:"run"` // strings, and if/then maps
	} `yaml:"requirements"`
	Tests []struct {
		Python *struct {
			Imports []string `yaml:"imports"`
		} `yaml:"python"`
		Script []string `yaml:"script"`
	} `yaml:"tests"`
	About struct {
		Homepage    string   `yaml:"homepage"`
		Repository  string   `yaml:"repository"`
		License     string   `yaml:"license"`
		LicenseFile []string `yaml:"license_file"`
		Summary     string   `yaml:"summary"`
	} `yaml:"about"`
	Extra struct {
		Maintainers []string `yaml:"recipe-maintainers"`
	} `yaml:"extra"`
}

var (
	recipePath = filepath.Join("..", "..", "..", "recipe", "recipe.yaml")
	jinjaVar   = regexp.MustCompile(`\$\{\{\s*([a-z_]+)\s*\}\}`)
	sha256Hex  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

func parseRecipe(t *testing.T, data []byte) *recipe {
	t.Helper()
	var r recipe
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("recipe: %v", err)
	}
	return &r
}

// expand replaces the recipe's ${{ name }} and ${{ version }} with its
// context's values, as rattler-build does.
func (r *recipe) expand(s string) string {
	return jinjaVar.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := r.Context[jinjaVar.FindStringSubmatch(m)[1]]; ok {
			return v
		}
		return m
	})
}

// hostBinaryVersion builds the bridge as mkwheel does (from the module's
// root, where the test then stays) and returns what its version command
// prints first.
func hostBinaryVersion(t *testing.T) string {
	t.Helper()
	t.Chdir(filepath.Join("..", "..", ".."))
	bin, err := build(context.Background(), runtime.GOOS+"/"+runtime.GOARCH, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v, err := binaryVersion(context.Background(), bin)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRecipe: the checked-in conda-forge recipe names the binary's
// version, downloads exactly the sdist mkwheel writes (PEP 625 name) from
// PyPI, has the placeholder or a real sha256, builds with Go through the
// sdist's backend, tests the console script and the import, and says MIT
// with the licence file.
func TestRecipe(t *testing.T) {
	data, err := os.ReadFile(recipePath)
	if err != nil {
		t.Fatal(err)
	}
	r := parseRecipe(t, data)
	v := hostBinaryVersion(t)
	if r.Context["name"] != wheel.Name || r.Context["version"] != v {
		t.Errorf("context is %v, want name %s and version %s (the binary's)", r.Context, wheel.Name, v)
	}
	if r.expand(r.Package.Name) != wheel.Name || r.expand(r.Package.Version) != v {
		t.Errorf("package is %s %s, want %s %s", r.Package.Name, r.Package.Version, wheel.Name, v)
	}
	url := r.expand(r.Source.URL)
	if want := "https://pypi.org/packages/source/m/" + wheel.Name + "/"; !strings.HasPrefix(url, want) {
		t.Errorf("source url %s is not under %s", url, want)
	}
	if path.Base(url) != wheel.SdistName(v) {
		t.Errorf("source url names %s, the sdist is %s", path.Base(url), wheel.SdistName(v))
	}
	if r.Source.SHA256 != recipePlaceholder && !sha256Hex.MatchString(r.Source.SHA256) {
		t.Errorf("source sha256 %q is neither 64 hex digits nor the placeholder %s", r.Source.SHA256, recipePlaceholder)
	}
	if r.Build.Number == nil || *r.Build.Number != 0 {
		t.Errorf("build number %v, want 0 for a new version", r.Build.Number)
	}
	script := strings.Join(r.Build.Script, "\n")
	for _, want := range []string{"-m pip install . ", "--no-deps", "--no-build-isolation"} {
		if !strings.Contains(script, want) {
			t.Errorf("build script %q lacks %q", script, want)
		}
	}
	if !slices.Contains(r.Requirements.Build, "${{ compiler('go-nocgo') }}") || !slices.Contains(r.Requirements.Build, "go >=${{ go_version }}") {
		t.Errorf("requirements.build %v lacks the go-nocgo compiler or go >=${{ go_version }}", r.Requirements.Build)
	}
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if pin := regexp.MustCompile(`(?m)^toolchain go(\S+)$`).FindSubmatch(gomod); pin == nil || r.Context["go_version"] != string(pin[1]) {
		t.Errorf("context go_version %q, go.mod's toolchain line %q: the recipe must build with the pinned Go", r.Context["go_version"], pin)
	}
	if !regexp.MustCompile(`^1[0-9]\.[0-9]+$`).MatchString(r.Context["macos_minimum"]) {
		t.Errorf("context macos_minimum %q: want the binary's minimum macOS, such as 13.0", r.Context["macos_minimum"])
	}
	if !slices.Contains(r.Requirements.Host, "python") || !slices.Contains(r.Requirements.Host, "pip") {
		t.Errorf("requirements.host %v, want python and pip", r.Requirements.Host)
	}
	var runReqs []string
	osx := false
	for _, req := range r.Requirements.Run {
		switch req := req.(type) {
		case string:
			runReqs = append(runReqs, strings.ReplaceAll(req, " ", ""))
		case map[string]any:
			osx = osx || req["if"] == "osx" && req["then"] == "__osx >=${{ macos_minimum }}"
		}
	}
	if !osx {
		t.Errorf("requirements.run %v: want `if: osx` then `__osx >=${{ macos_minimum }}`", r.Requirements.Run)
	}
	if !slices.Contains(runReqs, "python") || !slices.Contains(runReqs, wheel.RequiresDist) {
		t.Errorf("requirements.run %v, want python and %s (the wheel's Requires-Dist)", r.Requirements.Run, wheel.RequiresDist)
	}
	var imports, scripts []string
	for _, tc := range r.Tests {
		if tc.Python != nil {
			imports = append(imports, tc.Python.Imports...)
		}
		scripts = append(scripts, tc.Script...)
	}
	if !slices.Contains(imports, wheel.Package) {
		t.Errorf("tests import %v, not %s", imports, wheel.Package)
	}
	if !slices.Contains(scripts, wheel.Name+" version") || !slices.ContainsFunc(scripts, func(s string) bool { return strings.Contains(s, "== '${{ version }}'") }) {
		t.Errorf("test scripts %v do not run %q (the wheel's console script) and check the version it prints", scripts, wheel.Name+" version")
	}
	linked, err := notices(context.Background(), wheel.Platforms)
	if err != nil {
		t.Fatal(err)
	}
	expr, err := wheel.LicenseExpression(linked)
	if err != nil {
		t.Fatal(err)
	}
	if r.About.License != expr || !slices.Contains(r.About.LicenseFile, "LICENSE") || !slices.Contains(r.About.LicenseFile, wheel.NoticeDir+"/") {
		t.Errorf("about: license %q, license_file %v; want the sdist's %s, LICENSE and %s/", r.About.License, r.About.LicenseFile, expr, wheel.NoticeDir)
	}
	if r.About.Summary != wheel.Summary || r.About.Homepage == "" {
		t.Errorf("about: summary %q (want the wheel's), homepage %q", r.About.Summary, r.About.Homepage)
	}
	if len(r.Extra.Maintainers) == 0 || slices.Contains(r.Extra.Maintainers, "megane-labs") {
		t.Errorf("extra: recipe-maintainers %v: want people's GitHub handles or the placeholder %s, not the organisation", r.Extra.Maintainers, recipeMaintainerPlaceholder)
	}
}

// TestFillRecipe: make recipe puts the sdist's sha256 in place of the
// placeholder and changes nothing else; a recipe for another version, or
// one whose sha256 is already filled in, is refused.
func TestFillRecipe(t *testing.T) {
	tmpl, err := os.ReadFile(recipePath)
	if err != nil {
		t.Fatal(err)
	}
	r := parseRecipe(t, tmpl)
	sum := strings.Repeat("0123456789abcdef", 4)
	out, err := fillRecipe(tmpl, r.Context["version"], sum)
	if err != nil {
		t.Fatal(err)
	}
	filled := parseRecipe(t, out)
	if filled.Source.SHA256 != sum {
		t.Fatalf("filled recipe's sha256 is %q, want %s", filled.Source.SHA256, sum)
	}
	if got := bytes.Replace(out, []byte(sum), []byte(recipePlaceholder), 1); !bytes.Equal(got, tmpl) {
		t.Fatalf("filling changed more than the sha256:\n%s", out)
	}
	if _, err := fillRecipe(tmpl, "9.9.9", sum); err == nil || !strings.Contains(err.Error(), "context version") {
		t.Fatalf("a recipe for another version: got %v, want an error naming the context version", err)
	}
	if _, err := fillRecipe(out, r.Context["version"], sum); err == nil || !strings.Contains(err.Error(), "placeholder") {
		t.Fatalf("an already filled recipe: got %v, want an error naming the placeholder", err)
	}
}

// TestBackendWithoutGo: the sdist's PEP 517 backend, run where Go is not
// on PATH, fails with the one line saying what is needed (go.mod's
// toolchain line), not a traceback.
func TestBackendWithoutGo(t *testing.T) {
	// The interpreter itself, not a launcher (pyenv's is a shell script
	// that needs PATH).
	exe, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skipf("no python3: %v", err)
	}
	python := strings.TrimSpace(string(exe))
	gomod, err := os.ReadFile(filepath.Join("..", "..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^toolchain go(\S+)$`).FindSubmatch(gomod)
	if goLine == nil {
		t.Fatal("go.mod has no toolchain line")
	}
	backend, _ := filepath.Abs(filepath.Join("..", "..", "..", filepath.FromSlash(wheel.BackendPath)))
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "go.mod"), gomod, 0o644)
	emptyPath := t.TempDir() // python3 by its absolute path; no go anywhere on PATH
	cmd := exec.Command(python, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import "+wheel.BackendModule+" as b; b.build_wheel(sys.argv[2])", backend, t.TempDir())
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "PATH="+emptyPath)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	want := "building megane-jupyter-bridge from source needs Go >= " + string(goLine[1]) + " on PATH"
	if got := strings.TrimRight(stderr.String(), "\r\n"); err == nil || got != want { // one line (\r\n on Windows)
		t.Fatalf("without Go: %v, stderr %q, want exit status 1 and %q", err, stderr.String(), want)
	}
}

// TestBackendRefusesOlderGo: the sdist's backend builds with go.mod's
// toolchain line or later. A Go older than the pin (here the Go running
// the test, with GOTOOLCHAIN=local so that it cannot switch, against a
// pin above it) is refused in one line that names both and the fix; the
// pin itself passes that check.
func TestBackendRefusesOlderGo(t *testing.T) {
	exe, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skipf("no python3: %v", err)
	}
	python := strings.TrimSpace(string(exe))
	local, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Fatal(err)
	}
	have := strings.TrimSpace(string(local))
	backend, _ := filepath.Abs(filepath.Join("..", "..", "..", filepath.FromSlash(wheel.BackendPath)))
	for _, tc := range []struct{ pin, want string }{
		{"go1.999.0", "megane-jupyter-bridge is built with go1.999.0 or later (go.mod's toolchain line), not " + have + ", whose standard library has known vulnerabilities that reach the bridge: install Go 1.999.0, or let go fetch it (GOTOOLCHAIN=auto, the default, instead of GOTOOLCHAIN=local)"},
		{have, ""},
	} {
		t.Run(tc.pin, func(t *testing.T) {
			src := t.TempDir()
			os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/m\n\ngo 1.21\n\ntoolchain "+tc.pin+"\n"), 0o644)
			cmd := exec.Command(python, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import "+wheel.BackendModule+" as b; b._go()", backend)
			cmd.Dir = src
			cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			got := strings.TrimRight(stderr.String(), "\r\n")
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Go %s against the pin %s: %v, stderr %q, want it accepted", have, tc.pin, err, got)
				}
				return
			}
			if err == nil || got != tc.want {
				t.Fatalf("Go %s against the pin %s: %v, stderr %q, want exit status 1 and %q", have, tc.pin, err, got, tc.want)
			}
		})
	}
}

// TestSourceCommit: an sdist's COMMIT file is the commit (a checkout's
// git is not asked), and one that holds no commit is refused.
func TestSourceCommit(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	os.WriteFile(wheel.CommitFile, []byte("0123abcd+dirty\n"), 0o644)
	if c, err := sourceCommit(context.Background()); err != nil || c != "0123abcd+dirty" {
		t.Fatalf("got %q %v, want the COMMIT file's 0123abcd+dirty", c, err)
	}
	os.WriteFile(wheel.CommitFile, []byte("x y\n"), 0o644)
	if c, err := sourceCommit(context.Background()); err == nil {
		t.Fatalf("COMMIT holding %q: got %q, want an error", "x y", c)
	}
	os.Remove(wheel.CommitFile)
	if c, err := sourceCommit(context.Background()); err != nil || c != "" {
		t.Fatalf("no COMMIT, no checkout: got %q %v, want no commit", c, err)
	}
}

// TestPublishTwinePinned: the release workflow publishes with a pinned
// twine that reads Metadata-Version 2.4 and does Trusted Publishing by
// itself (6.1.0 or later), and with no action that bundles a twine of its
// own; make twine-check reads the same pin and refuses to check with an
// older twine. pypa/gh-action-pypi-publish v1.8.14, pinned before, bundles
// twine 5.0.0, which rejects our metadata: the first tag would have failed.
func TestPublishTwinePinned(t *testing.T) {
	wf, err := os.ReadFile(filepath.Join("..", "..", "..", ".github", "workflows", "release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	pins := regexp.MustCompile(`"twine==([0-9.]+)"`).FindAllStringSubmatch(string(wf), -1)
	if len(pins) != 1 {
		t.Fatalf("release.yml pins twine %d times, want once: %v", len(pins), pins)
	}
	var v [3]int
	fmt.Sscanf(pins[0][1], "%d.%d.%d", &v[0], &v[1], &v[2])
	if v[0] < 6 || v[0] == 6 && v[1] < 1 {
		t.Errorf("release.yml publishes with twine %s; 6.1.0 or later reads Metadata-Version 2.4 and does Trusted Publishing", pins[0][1])
	}
	if strings.Contains(string(wf), "gh-action-pypi-publish@") {
		t.Errorf("release.yml publishes through pypa/gh-action-pypi-publish, whose bundled twine is not the one make twine-check runs")
	}
	check, err := os.ReadFile(filepath.Join("..", "..", "..", ".ci", "twine-check.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(check), `"twine==`) || !strings.Contains(string(check), "release.yml") {
		t.Errorf(".ci/twine-check.sh does not read the workflow's twine pin")
	}
}

// TestWorkflowsUseThePinnedGo: the GitHub workflows set up the Go of
// go.mod's toolchain line (setup-go reads only the go line from go.mod, so
// the version is written there too), and nothing else: a release built
// with another Go would not be the one make release-rehearsal checked.
func TestWorkflowsUseThePinnedGo(t *testing.T) {
	gomod, err := os.ReadFile(filepath.Join("..", "..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	pin := regexp.MustCompile(`(?m)^toolchain go(\S+)$`).FindSubmatch(gomod)
	if pin == nil {
		t.Fatal("go.mod has no toolchain line: the release's Go is pinned there")
	}
	for _, name := range []string{"ci.yml", "release.yml"} {
		wf, err := os.ReadFile(filepath.Join("..", "..", "..", ".github", "workflows", name))
		if err != nil {
			t.Fatal(err)
		}
		uses := strings.Count(string(wf), "actions/setup-go@")
		versions := regexp.MustCompile(`(?m)^\s*go-version: "([^"]+)"`).FindAllSubmatch(wf, -1)
		if len(versions) != uses || uses == 0 {
			t.Errorf("%s: %d setup-go steps, %d go-version lines: want one each", name, uses, len(versions))
		}
		for _, v := range versions {
			if string(v[1]) != string(pin[1]) {
				t.Errorf("%s sets up Go %s, go.mod's toolchain line says %s", name, v[1], pin[1])
			}
		}
	}
}

// TestLinkedModulesHaveLicences: every module the bridge links on any
// wheel platform has its licence recorded (wheel.ModuleLicence) and a
// licence file in the module cache, and Go's own is there: a new
// dependency fails here, naming itself, until a person has read its
// licence.
func TestLinkedModulesHaveLicences(t *testing.T) {
	t.Chdir(filepath.Join("..", "..", ".."))
	all, err := notices(context.Background(), wheel.Platforms)
	if err != nil {
		t.Fatal(err)
	}
	modules := map[string]bool{}
	for _, n := range all {
		modules[n.Module] = true
	}
	if !modules[wheel.StdModule] || !modules["github.com/modelcontextprotocol/go-sdk"] {
		t.Errorf("notices cover %v: want Go's standard library and the go-sdk at least", modules)
	}
	expr, err := wheel.LicenseExpression(all)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(expr, wheel.License+" AND ") || !strings.Contains(expr, "Apache-2.0") {
		t.Errorf("License-Expression %q: want the bridge's %s first, and Apache-2.0 (prometheus, go-sdk)", expr, wheel.License)
	}
}

// TestRequiresPythonTested: the wheels' Requires-Python is the oldest
// Python a CI job installs them into (the GitHub workflow's matrix), so
// no Python is promised that nothing runs.
func TestRequiresPythonTested(t *testing.T) {
	wf, err := os.ReadFile(filepath.Join("..", "..", "..", ".github", "workflows", "ci.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var lowest string
	for _, m := range regexp.MustCompile(`python: "3\.(\d+)"`).FindAllSubmatch(wf, -1) {
		if lowest == "" || len(m[1]) < len(lowest) || len(m[1]) == len(lowest) && string(m[1]) < lowest {
			lowest = string(m[1])
		}
	}
	if want := ">=3." + lowest; lowest == "" || wheel.RequiresPython != want {
		t.Errorf("Requires-Python is %s, the lowest Python ci.yml's matrix tests the wheel with gives %s", wheel.RequiresPython, want)
	}
}
