package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter/wheel"
)

// tinyRelease writes, into dir/dist and dir/extra, a release as the
// workflow assembles one, from an empty Go program built for every wheel
// platform (what checkRelease reads: headers, build information, metadata,
// not the bridge's code), and returns the Go that built them.
func tinyRelease(t *testing.T, dir string) (pin string) {
	var macOS string
	t.Helper()
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "go.mod"), []byte("module tiny\n\ngo 1.26\n"), 0o644)
	os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	dist, extra := filepath.Join(dir, "dist"), filepath.Join(dir, "extra")
	os.MkdirAll(extra, 0o755)
	std := []wheel.Notice{{Module: wheel.StdModule, File: "LICENSE", Data: []byte("Copyright 2009 The Go Authors.\n")}}
	var sums strings.Builder
	for _, p := range wheel.Platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		bin := filepath.Join(src, goos+"_"+goarch)
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build for %s: %v\n%s", p, err, out)
		}
		whl, err := wheel.Write(wheel.Options{Version: "0.1.0", Platform: p, Binary: bin, Dir: dist, LicenseText: []byte("MIT\n"), Notices: std})
		if err != nil {
			t.Fatal(err)
		}
		info, err := wheel.Verify(whl)
		if err != nil {
			t.Fatal(err)
		}
		pin = info.GoVersion
		if goos == "darwin" {
			var major, minor int
			fmt.Sscanf(info.Tags[0], "macosx_%d_%d_", &major, &minor)
			macOS = fmt.Sprintf("%d.%d", major, minor)
		}
		sbom := fmt.Sprintf(`{"bomFormat": "CycloneDX", "metadata": {"component": {"properties": [
			{"name": "cdx:gomod:build:env:GOOS", "value": %q}, {"name": "cdx:gomod:build:env:GOARCH", "value": %q},
			{"name": "cdx:gomod:build:env:GOVERSION", "value": %q}]}},
			"components": [{"purl": "pkg:golang/std@%s?goarch=%s&goos=%s&type=module"}]}`, goos, goarch, pin, pin, goarch, goos)
		os.WriteFile(filepath.Join(extra, SBOMName(p)), []byte(sbom), 0o644)
	}
	files := []wheel.SourceFile{
		{Name: "go.mod", Data: []byte("module example\n\ngo 1.26.8\n\ntoolchain " + pin + "\n")},
		{Name: "LICENSE", Data: []byte("MIT\n")},
		{Name: wheel.BackendPath + "/" + wheel.BackendModule + ".py", Data: []byte("# backend\n")},
	}
	sdist, err := wheel.WriteSdist(wheel.SdistOptions{Version: "0.1.0", Files: files, Notices: std, Dir: dist})
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dist)
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(dist, e.Name()))
		sum := sha256.Sum256(data)
		fmt.Fprintf(&sums, "%x  %s\n", sum, e.Name())
	}
	os.WriteFile(filepath.Join(extra, sumsFile), []byte(sums.String()), 0o644)
	tmpl, err := os.ReadFile(recipePath)
	if err != nil {
		t.Fatal(err)
	}
	tmpl = regexp.MustCompile(`go_version: "[0-9.]+"`).ReplaceAll(tmpl, []byte(`go_version: "`+strings.TrimPrefix(pin, "go")+`"`))
	tmpl = regexp.MustCompile(`macos_minimum: "[0-9.]+"`).ReplaceAll(tmpl, []byte(`macos_minimum: "`+macOS+`"`))
	data, _ := os.ReadFile(sdist)
	sum := sha256.Sum256(data)
	recipe, err := fillRecipe(tmpl, "0.1.0", hex.EncodeToString(sum[:]))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(extra, recipeFile), recipe, 0o644)
	return pin
}

// TestCheckRelease: a release whose every binary was built by the pinned
// Go, with its five wheels, its sdist, the recipe, SHA256SUMS and the
// SBOMs agreeing, passes, one line per check; each way a release could go
// wrong fails, naming the file and what to do.
func TestCheckRelease(t *testing.T) {
	dir := t.TempDir()
	pin := tinyRelease(t, dir)
	dist, extra := filepath.Join(dir, "dist"), filepath.Join(dir, "extra")
	var out bytes.Buffer
	if err := checkRelease(&out, dist, extra, pin); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if n := strings.Count(out.String(), "\n"); n < 10 || !strings.Contains(out.String(), "WARNING: recipe/recipe.yaml's recipe-maintainers") {
		t.Errorf("printed %d lines, want one per check and the maintainer warning:\n%s", n, out.String())
	}

	for _, tc := range []struct {
		name   string
		pin    string
		break_ func(t *testing.T)
		want   string
	}{
		{"another Go", "go1.0.0", nil, "was built by " + pin + ", not go1.0.0"},
		{"a platform missing", pin, func(t *testing.T) {
			m, _ := filepath.Glob(filepath.Join(dist, "*win_amd64.whl"))
			os.Remove(m[0])
		}, "no wheel for windows/amd64"},
		{"recipe for another macOS", pin, func(t *testing.T) {
			p := filepath.Join(extra, recipeFile)
			data, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(data, []byte(`macos_minimum: "`), []byte(`macos_minimum: "1`), 1), 0o644)
		}, "the recipe's macos_minimum"},
		{"a sum that is not the file's", pin, func(t *testing.T) {
			p := filepath.Join(extra, sumsFile)
			data, _ := os.ReadFile(p)
			os.WriteFile(p, append([]byte("0"), data[1:]...), 0o644)
		}, "is listed as"},
		{"an SBOM of another Go", pin, func(t *testing.T) {
			p := filepath.Join(extra, SBOMName("linux/arm64"))
			data, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.ReplaceAll(data, []byte(pin), []byte("go1.0.0")), 0o644)
		}, "describes a build for linux/arm64 by go1.0.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			copied := t.TempDir()
			if err := os.CopyFS(copied, os.DirFS(dir)); err != nil {
				t.Fatal(err)
			}
			dist, extra = filepath.Join(copied, "dist"), filepath.Join(copied, "extra")
			if tc.break_ != nil {
				tc.break_(t)
			}
			err := checkRelease(&bytes.Buffer{}, dist, extra, tc.pin)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
