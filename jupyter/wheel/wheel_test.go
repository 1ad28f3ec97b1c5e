package wheel

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// buildTiny builds an empty Go program for platform (CGO_ENABLED=0, as make
// wheels builds the bridge) and returns the binary: the wheel's platform
// checks and tags read only the executable's headers.
func buildTiny(t *testing.T, platform string) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module tiny\n\ngo 1.26\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	goos, goarch, _ := strings.Cut(platform, "/")
	bin := filepath.Join(dir, "tiny")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build for %s: %v\n%s", platform, err, out)
	}
	return bin
}

// minMacOS is the minimum macOS (as a wheel tag writes it) that the go
// command buildTiny runs declares in the binaries it links, by Go release
// (its release notes): the tag must follow the binary.
func minMacOS(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Fatalf("go env GOVERSION: %v", err)
	}
	release := strings.Join(strings.SplitN(strings.TrimSpace(string(out)), ".", 3)[:2], ".")
	known := map[string]string{"go1.26": "12_0", "go1.27": "13_0"}
	v, ok := known[release]
	if !ok {
		t.Fatalf("%s: add the minimum macOS its release notes give to minMacOS", out)
	}
	return v
}

// TestTags: each platform's tag comes from the binary (macOS: the minimum
// version Go's linker writes), and a binary for another platform, or one
// linked dynamically, is refused.
func TestTags(t *testing.T) {
	macOS := minMacOS(t)
	for _, tc := range []struct {
		platform, built, want, refused string
	}{
		{"linux/amd64", "linux/amd64", "manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64", ""},
		{"linux/arm64", "linux/arm64", "manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64", ""},
		{"darwin/arm64", "darwin/arm64", "macosx_" + macOS + "_arm64", ""},
		{"darwin/amd64", "darwin/amd64", "macosx_" + macOS + "_x86_64", ""},
		{"windows/amd64", "windows/amd64", "win_amd64", ""},
		{"linux/arm64", "linux/amd64", "", "not linux/arm64"},
		{"darwin/amd64", "linux/amd64", "", "not a macOS executable"},
		{"windows/amd64", "darwin/arm64", "", "not a Windows executable"},
		{"freebsd/amd64", "linux/amd64", "", "no wheel platform"},
	} {
		t.Run(tc.platform+" built for "+tc.built, func(t *testing.T) {
			bin, _ := os.ReadFile(buildTiny(t, tc.built))
			tags, err := Tags(tc.platform, bin)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("got %v %v, want an error saying %q", tags, err, tc.refused)
				}
				return
			}
			if err != nil || strings.Join(tags, ".") != tc.want {
				t.Fatalf("got %v %v, want %s", tags, err, tc.want)
			}
		})
	}
	t.Run("dynamically linked", func(t *testing.T) {
		bin, err := os.ReadFile("/bin/sh")
		if err != nil {
			t.Skip("no /bin/sh to read")
		}
		if _, err := Tags("linux/amd64", bin); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
			t.Fatalf("a dynamically linked /bin/sh: %v, want a refusal naming CGO_ENABLED=0", err)
		}
	})
}

// TestWriteVerify: a written wheel passes Verify; a changed file, a file
// missing from RECORD, and a version pip would not accept are refused.
func TestWriteVerify(t *testing.T) {
	bin := buildTiny(t, "linux/amd64")
	dir := t.TempDir()
	licence := []byte("MIT License\n\nCopyright (c) 2026 The megane-jupyter-bridge authors\n")
	std := []Notice{{Module: StdModule, File: "LICENSE", Data: []byte("Copyright 2009 The Go Authors.\n")}}
	if _, err := Write(Options{Version: "0.1.0-dev", Platform: "linux/amd64", Binary: bin, Dir: dir, LicenseText: licence, Notices: std}); err == nil || !strings.Contains(err.Error(), "PEP 440") {
		t.Errorf("version 0.1.0-dev: %v, want a PEP 440 refusal", err)
	}
	if _, err := Write(Options{Version: "1.2.3", Platform: "linux/amd64", Binary: bin, Dir: dir, Notices: std}); err == nil || !strings.Contains(err.Error(), "licence") {
		t.Errorf("no licence text: %v, want a refusal", err)
	}
	if _, err := Write(Options{Version: "1.2.3", Platform: "linux/amd64", Binary: bin, Dir: dir, LicenseText: licence}); err == nil || !strings.Contains(err.Error(), "Go's standard library") {
		t.Errorf("no notice for Go: %v, want a refusal", err)
	}
	unread := append(std, Notice{Module: "example.com/unread", File: "LICENSE", Data: []byte("?")})
	if _, err := Write(Options{Version: "1.2.3", Platform: "linux/amd64", Binary: bin, Dir: dir, LicenseText: licence, Notices: unread}); err == nil || !strings.Contains(err.Error(), "example.com/unread, whose licence is not recorded") {
		t.Errorf("a module whose licence is not recorded: %v, want a refusal naming it", err)
	}
	path, err := Write(Options{Version: "1.2.3rc1", Platform: "linux/amd64", Binary: bin, Dir: dir, LicenseText: licence, Notices: std, Readme: []byte("# x\n\nSee [the protocol](bridge/PROTOCOL.md).\n")})
	if err != nil {
		t.Fatal(err)
	}
	info, err := Verify(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != "1.2.3rc1" || info.Files["megane_jupyter_bridge/bin/megane-jupyter-bridge"].Perm() != 0o755 ||
		!strings.Contains(info.EntryPoints, "[jupyter_serverproxy_servers]\nmegane = megane_jupyter_bridge:setup_megane\n") {
		t.Fatalf("wheel read back: %+v", info)
	}
	if info.Metadata["License-Expression"] != "MIT AND BSD-3-Clause" || !slices.Equal(info.LicenseFiles, []string{"LICENSE", "third_party/std/LICENSE"}) || info.Metadata["Metadata-Version"] != "2.4" {
		t.Errorf("licence metadata: %v %v, want Metadata-Version 2.4, License-Expression MIT AND BSD-3-Clause, License-File LICENSE and third_party/std/LICENSE", info.Metadata, info.LicenseFiles)
	}
	for _, f := range []string{"LICENSE", "third_party/std/LICENSE"} {
		if _, ok := info.Files["megane_jupyter_bridge-1.2.3rc1.dist-info/licenses/"+f]; !ok {
			t.Errorf("the wheel has no dist-info/licenses/%s: %v", f, info.Files)
		}
	}
	if info.GoVersion == "" || !slices.Equal(info.Linked, []string{StdModule}) {
		t.Errorf("the binary read back as built by %q, linking %v; want a Go version and only the standard library", info.GoVersion, info.Linked)
	}
	if info.Metadata["Description-Content-Type"] != "text/markdown" || info.Metadata["Requires-Python"] != RequiresPython {
		t.Errorf("METADATA %v: want the README as text/markdown and Requires-Python %s", info.Metadata, RequiresPython)
	}
	// The same inputs give the same bytes.
	first, _ := os.ReadFile(path)
	if again, err := Write(Options{Version: "1.2.3rc1", Platform: "linux/amd64", Binary: bin, Dir: t.TempDir(), LicenseText: licence, Notices: std, Readme: []byte("# x\n\nSee [the protocol](bridge/PROTOCOL.md).\n")}); err != nil {
		t.Fatal(err)
	} else if second, _ := os.ReadFile(again); !bytes.Equal(first, second) {
		t.Errorf("two builds of the same wheel differ")
	}

	for _, tc := range []struct {
		name   string
		change func(name string, data []byte) (string, []byte)
		want   string
	}{
		{"changed file", func(n string, d []byte) (string, []byte) {
			if strings.HasSuffix(n, "__init__.py") {
				d = append(d, '#')
			}
			return n, d
		}, "does not match its RECORD line"},
		{"unlisted file", func(n string, d []byte) (string, []byte) {
			if strings.HasSuffix(n, "__main__.py") {
				n = "megane_jupyter_bridge/extra.py"
			}
			return n, d
		}, "RECORD lists"},
		{"licence file dropped", func(n string, d []byte) (string, []byte) {
			if strings.HasSuffix(n, "/METADATA") {
				d = bytes.Replace(d, []byte("License-File: third_party/std/LICENSE\n"), nil, 1)
			}
			return n, d
		}, "does not match its RECORD line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), filepath.Base(path))
			rewrite(t, path, bad, tc.change)
			if _, err := Verify(bad); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestCheckNotices: a wheel must carry a licence file of Go and of every
// module its binary links, and name each one's licence in
// License-Expression; what is missing is named.
func TestCheckNotices(t *testing.T) {
	files := []string{"LICENSE", "third_party/std/LICENSE", "third_party/github.com/gorilla/websocket/LICENSE"}
	for _, tc := range []struct {
		name   string
		linked []string
		expr   string
		want   string
	}{
		{"all there", []string{StdModule, "github.com/gorilla/websocket"}, "MIT AND BSD-2-Clause AND BSD-3-Clause", ""},
		{"no file", []string{StdModule, "golang.org/x/sys"}, "MIT AND BSD-3-Clause", "links golang.org/x/sys, but no licence file of it"},
		{"not in the expression", []string{StdModule, "github.com/gorilla/websocket"}, "MIT AND BSD-3-Clause", "does not name BSD-2-Clause"},
		{"not recorded", []string{"example.com/new"}, "MIT", "no licence file of it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkNotices(tc.linked, files, tc.expr)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestAbsoluteLinks: the long description on PyPI links into the
// repository at the release's tag; images come from their raw files;
// absolute URLs and anchors stay as they are.
func TestAbsoluteLinks(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"[CONFIG](jupyter/CONFIG.md#hub)", "[CONFIG](" + Repository + "/blob/v1.0/jupyter/CONFIG.md#hub)"},
		{"![shot](./bridge/s.png \"title\")", "![shot](https://raw.githubusercontent.com/megane-labs/megane-jupyter-bridge/v1.0/bridge/s.png \"title\")"},
		{"[go](https://go.dev) and [below](#install)", "[go](https://go.dev) and [below](#install)"},
		{"`a[i](j)` is code", "`a[i](" + Repository + "/blob/v1.0/j)` is code"}, // code spans are not parsed: a harmless link inside code
	} {
		if got := string(absoluteLinks([]byte(tc.in), "v1.0")); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// rewrite copies the wheel from to to, passing each entry through change.
func rewrite(t *testing.T, from, to string, change func(string, []byte) (string, []byte)) {
	t.Helper()
	zr, err := zip.OpenReader(from)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		rc, _ := f.Open()
		data, _ := io.ReadAll(rc)
		rc.Close()
		name, data := change(f.Name, data)
		w, _ := zw.Create(name)
		w.Write(data)
	}
	zw.Close()
	os.WriteFile(to, buf.Bytes(), 0o644)
}

// FuzzParseRecord: any RECORD is parsed or refused without panicking, and
// every path accepted stays inside the wheel.
func FuzzParseRecord(f *testing.F) {
	f.Add([]byte("a/b.py,sha256=abc,3\nx.dist-info/RECORD,,\n"))
	f.Add([]byte("../evil,sha256=x,1\n"))
	f.Add([]byte("\"a,b\",,\n/abs,,\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := ParseRecord(data)
		if err != nil {
			return
		}
		for _, r := range rows {
			if strings.HasPrefix(r.Path, "/") || slices.Contains(strings.Split(r.Path, "/"), "..") || r.Size < -1 {
				t.Fatalf("accepted %+v", r)
			}
		}
	})
}
