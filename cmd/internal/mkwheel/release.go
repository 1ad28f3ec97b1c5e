package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter/wheel"
)

// releaseFiles are what checkRelease reads: DIST (the five wheels and the
// sdist, uploaded to PyPI) and EXTRA (the rest of the GitHub release).
const (
	recipeFile = "recipe.yaml"
	sumsFile   = "SHA256SUMS"
)

// SBOMName is the CycloneDX SBOM file of the binary built for platform,
// in EXTRA.
func SBOMName(platform string) string {
	return "megane-jupyter-bridge-" + strings.ReplaceAll(platform, "/", "-") + ".cdx.json"
}

// checkRelease checks a release as the workflow assembles it, before
// anything is published, printing one line per check to w; the first
// failure is returned. pin is the Go every binary must be built with
// (go.mod's toolchain line, such as go1.27.3). It checks:
//   - one wheel per wheel.Platforms and one sdist, all of one version;
//     every wheel passes wheel.Verify (RECORD, licence files against the
//     modules its binary links) and its binary was built by pin;
//   - the sdist passes wheel.VerifySdist and its go.mod pins the same Go;
//   - the recipe names the sdist's sha256 and version, pin's Go, and the
//     minimum macOS the darwin wheels' binaries declare; a maintainer
//     placeholder still in it is printed as a warning (conda-forge, not
//     PyPI, needs it);
//   - SHA256SUMS lists every wheel and the sdist with their sums;
//   - an SBOM per platform names the Go and every module (at its version)
//     that platform's binary links.
func checkRelease(w io.Writer, dist, extra, pin string) error {
	wheels, _ := filepath.Glob(filepath.Join(dist, "*.whl"))
	sdists, _ := filepath.Glob(filepath.Join(dist, "*.tar.gz"))
	if len(sdists) != 1 {
		return fmt.Errorf("%s holds %d sdists, want 1", dist, len(sdists))
	}
	byPlatform := map[string]*wheel.Info{}
	var version, macOS string
	for _, f := range wheels {
		info, err := wheel.Verify(f)
		if err != nil {
			return err
		}
		p, err := wheelPlatform(info.Tags)
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
		if byPlatform[p] != nil {
			return fmt.Errorf("%s holds two wheels for %s", dist, p)
		}
		byPlatform[p] = info
		if version == "" {
			version = info.Version
		} else if info.Version != version {
			return fmt.Errorf("%s is version %s, another wheel %s", filepath.Base(f), info.Version, version)
		}
		if info.GoVersion != pin {
			return fmt.Errorf("%s: its binary was built by %s, not %s (go.mod's toolchain line): build with GOTOOLCHAIN=%s", filepath.Base(f), info.GoVersion, pin, pin)
		}
		if strings.HasPrefix(p, "darwin/") {
			m := regexp.MustCompile(`^macosx_(\d+)_(\d+)_`).FindStringSubmatch(info.Tags[0])
			if m == nil {
				return fmt.Errorf("%s: tag %s names no macOS version", filepath.Base(f), info.Tags[0])
			}
			if v := m[1] + "." + m[2]; macOS == "" || v > macOS {
				macOS = v
			}
		}
		fmt.Fprintf(w, "release: %s: %s, built by %s, %d linked modules with their licence files\n", p, filepath.Base(f), info.GoVersion, len(info.Linked)-1)
	}
	for _, p := range wheel.Platforms {
		if byPlatform[p] == nil {
			return fmt.Errorf("%s has no wheel for %s", dist, p)
		}
	}
	sd, err := wheel.VerifySdist(sdists[0])
	if err != nil {
		return err
	}
	if sd.Version != version {
		return fmt.Errorf("the sdist is version %s, the wheels %s", sd.Version, version)
	}
	if sd.Toolchain != pin {
		return fmt.Errorf("the sdist's go.mod pins %q, not %s: a build from it would use another Go", sd.Toolchain, pin)
	}
	sdistData, err := os.ReadFile(sdists[0])
	if err != nil {
		return err
	}
	sdistSum := sha256.Sum256(sdistData)
	fmt.Fprintf(w, "release: sdist %s, %d licence files, go.mod pins %s\n", filepath.Base(sdists[0]), len(sd.LicenseFiles), sd.Toolchain)

	if err := checkRecipe(w, filepath.Join(extra, recipeFile), version, hex.EncodeToString(sdistSum[:]), pin, macOS); err != nil {
		return err
	}
	if err := checkSums(filepath.Join(extra, sumsFile), append(wheels, sdists[0])); err != nil {
		return err
	}
	fmt.Fprintf(w, "release: %s lists the %d files with their sums\n", sumsFile, len(wheels)+1)
	for _, p := range wheel.Platforms {
		if err := checkSBOM(filepath.Join(extra, SBOMName(p)), p, byPlatform[p]); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "release: an SBOM per platform names its binary's Go and every module it links, at its version\n")
	return nil
}

// wheelPlatform is the GOOS/GOARCH of a wheel's tags (wheel.Tags).
func wheelPlatform(tags []string) (string, error) {
	t := strings.Join(tags, ".")
	linux, mac := strings.HasPrefix(t, "manylinux_"), strings.HasPrefix(t, "macosx_")
	switch {
	case linux && strings.HasSuffix(t, "_x86_64"):
		return "linux/amd64", nil
	case linux && strings.HasSuffix(t, "_aarch64"):
		return "linux/arm64", nil
	case mac && strings.HasSuffix(t, "_x86_64"):
		return "darwin/amd64", nil
	case mac && strings.HasSuffix(t, "_arm64"):
		return "darwin/arm64", nil
	case t == "win_amd64":
		return "windows/amd64", nil
	}
	return "", fmt.Errorf("tags %s are no wheel platform", t)
}

// recipeLine matches the recipe's top-level-context and source lines
// checkRecipe reads: "  key: value".
var recipeLine = regexp.MustCompile(`^  ([a-z_0-9]+): "?([^"#]*?)"?\s*$`)

func checkRecipe(w io.Writer, path, version, sum, pin, macOS string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("the recipe: %w", err)
	}
	got := map[string]string{}
	placeholder := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if m := recipeLine.FindStringSubmatch(sc.Text()); m != nil {
			if _, seen := got[m[1]]; !seen {
				got[m[1]] = m[2]
			}
		}
		placeholder = placeholder || strings.TrimSpace(sc.Text()) == "- "+recipeMaintainerPlaceholder
	}
	for _, c := range []struct{ key, want, why string }{
		{"version", version, "the release's version"},
		{"sha256", sum, "the sdist's sha256 (make recipe fills it in)"},
		{"go_version", strings.TrimPrefix(pin, "go"), "go.mod's toolchain line"},
		{"macos_minimum", macOS, "the minimum macOS the darwin binaries declare (their wheels' tags)"},
	} {
		if got[c.key] != c.want {
			return fmt.Errorf("the recipe's %s is %q, want %q: %s", c.key, got[c.key], c.want, c.why)
		}
	}
	fmt.Fprintf(w, "release: recipe for %s: the sdist's sha256, Go %s, macOS %s or later\n", version, got["go_version"], macOS)
	if placeholder {
		fmt.Fprintf(w, "release: WARNING: recipe/recipe.yaml's recipe-maintainers is still %s: put the maintainers' GitHub handles there before submitting it to conda-forge (PyPI does not need it)\n", recipeMaintainerPlaceholder)
	}
	return nil
}

func checkSums(path string, files []string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	listed := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			return fmt.Errorf("%s: %q is not a sha256sum line", sumsFile, line)
		}
		listed[name] = sum
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		if listed[filepath.Base(f)] != hex.EncodeToString(sum[:]) {
			return fmt.Errorf("%s: %s is listed as %q, its sha256 is %x", sumsFile, filepath.Base(f), listed[filepath.Base(f)], sum)
		}
	}
	if len(listed) != len(files) {
		return fmt.Errorf("%s lists %d files, the release has %d", sumsFile, len(listed), len(files))
	}
	return nil
}

// cdx is the part of a CycloneDX SBOM checkSBOM reads.
type cdx struct {
	BOMFormat string `json:"bomFormat"`
	Metadata  struct {
		Component struct {
			Properties []struct{ Name, Value string } `json:"properties"`
		} `json:"component"`
	} `json:"metadata"`
	Components []struct {
		PURL string `json:"purl"`
	} `json:"components"`
}

func checkSBOM(path, platform string, info *wheel.Info) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("the SBOM for %s: %w", platform, err)
	}
	var bom cdx
	if err := json.Unmarshal(data, &bom); err != nil || bom.BOMFormat != "CycloneDX" {
		return fmt.Errorf("%s: not a CycloneDX JSON SBOM (%v)", filepath.Base(path), err)
	}
	props := map[string]string{}
	for _, p := range bom.Metadata.Component.Properties {
		props[p.Name] = p.Value
	}
	goos, goarch, _ := strings.Cut(platform, "/")
	if props["cdx:gomod:build:env:GOOS"] != goos || props["cdx:gomod:build:env:GOARCH"] != goarch || props["cdx:gomod:build:env:GOVERSION"] != info.GoVersion {
		return fmt.Errorf("%s describes a build for %s/%s by %s, the wheel's binary is for %s by %s", filepath.Base(path),
			props["cdx:gomod:build:env:GOOS"], props["cdx:gomod:build:env:GOARCH"], props["cdx:gomod:build:env:GOVERSION"], platform, info.GoVersion)
	}
	purls := map[string]bool{}
	for _, c := range bom.Components {
		p, _, _ := strings.Cut(c.PURL, "?")
		purls[p] = true
	}
	for mod, v := range info.Deps {
		if !purls["pkg:golang/"+mod+"@"+v] {
			return fmt.Errorf("%s does not name %s@%s, which the %s binary links", filepath.Base(path), mod, v, platform)
		}
	}
	if !purls["pkg:golang/std@"+info.GoVersion] {
		return fmt.Errorf("%s does not name Go's standard library at %s", filepath.Base(path), info.GoVersion)
	}
	return nil
}

// errNoPin is returned when go.mod has no toolchain line.
var errNoPin = errors.New("go.mod has no toolchain line: the release's Go is pinned there")

// pinnedGo reads go.mod's toolchain line (go1.27.3) in the current directory.
func pinnedGo() (string, error) {
	data, err := os.ReadFile("go.mod")
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^toolchain (go\S+)\r?$`).FindSubmatch(data)
	if m == nil {
		return "", errNoPin
	}
	return string(m[1]), nil
}
