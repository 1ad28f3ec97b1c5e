package wheel

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sdistFiles() []SourceFile {
	return []SourceFile{
		{Name: "go.mod", Data: []byte("module example\n\ngo 1.26.8\n")},
		{Name: "LICENSE", Data: []byte("MIT License\n")},
		{Name: "cmd/x/main.go", Data: []byte("package main\n\nfunc main() {}\n")},
		{Name: BackendPath + "/" + BackendModule + ".py", Data: []byte("# backend\n")},
	}
}

func sdistNotices() []Notice {
	return []Notice{
		{Module: StdModule, File: "LICENSE", Data: []byte("Copyright 2009 The Go Authors.\n")},
		{Module: "github.com/prometheus/common", File: "NOTICE", Data: []byte("Common libraries shared by Prometheus Go components.\n")},
		{Module: "github.com/prometheus/common", File: "LICENSE", Data: []byte("Apache License\n")},
	}
}

// TestWriteSdist: the same options give the same bytes, whatever order the
// files come in; the sdist reads back with its metadata, commit and
// files; SOURCE_DATE_EPOCH sets the entries' time.
func TestWriteSdist(t *testing.T) {
	files := sdistFiles()
	a, err := WriteSdist(SdistOptions{Version: "1.2.3", Files: files, Notices: sdistNotices(), Commit: "abc123", Dir: filepath.Join(t.TempDir(), "a")})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(a) != "megane_jupyter_bridge-1.2.3.tar.gz" {
		t.Fatalf("sdist named %s", filepath.Base(a))
	}
	reversed := []SourceFile{files[3], files[2], files[1], files[0]}
	b, err := WriteSdist(SdistOptions{Version: "1.2.3", Files: reversed, Notices: sdistNotices(), Commit: "abc123", Dir: filepath.Join(t.TempDir(), "b")})
	if err != nil {
		t.Fatal(err)
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if !bytes.Equal(da, db) {
		t.Fatal("the same files in another order gave other bytes")
	}
	// gzip header: no name, MTIME 0 (bytes 4-7), OS unknown.
	if !bytes.Equal(da[3:8], []byte{0, 0, 0, 0, 0}) {
		t.Fatalf("gzip header flags and MTIME % x, want all zero", da[3:8])
	}
	info, err := VerifySdist(a)
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != "1.2.3" || info.Commit != "abc123" || info.Metadata["License-Expression"] != "MIT AND Apache-2.0 AND BSD-3-Clause" || info.Metadata["Metadata-Version"] != "2.4" {
		t.Fatalf("read back %+v", info)
	}
	want := []string{CommitFile, "LICENSE", "PKG-INFO", "cmd/x/main.go", "go.mod", BackendPath + "/" + BackendModule + ".py", "pyproject.toml",
		"third_party/github.com/prometheus/common/LICENSE", "third_party/github.com/prometheus/common/NOTICE", "third_party/std/LICENSE"}
	for _, f := range want {
		if _, ok := info.Files[f]; !ok {
			t.Errorf("%s is not in the sdist (it holds %v)", f, info.Files)
		}
	}
	if len(info.Files) != len(want) {
		t.Errorf("the sdist holds %v, want %v", info.Files, want)
	}
	pp := info.Pyproject
	if pp.BuildSystem.BuildBackend != BackendModule || pp.BuildSystem.BackendPath[0] != BackendPath || pp.Project.License != info.Metadata["License-Expression"] || len(pp.Project.LicenseFiles) != 4 || pp.Project.Dependencies[0] != RequiresDist {
		t.Errorf("pyproject.toml read back as %+v", pp)
	}
	// PKG-INFO is the wheels' METADATA.
	sorted, _ := sortedNotices(sdistNotices())
	desc, _ := describe("1.2.3", sorted, nil)
	if pkgInfo := sdistEntry(t, da, "PKG-INFO"); !bytes.Equal(pkgInfo, desc.metadata()) {
		t.Errorf("PKG-INFO differs from the wheels' METADATA:\n%s", pkgInfo)
	}

	when, err := SourceDate("1700000000")
	if err != nil {
		t.Fatal(err)
	}
	c, err := WriteSdist(SdistOptions{Version: "1.2.3", Files: files, Notices: sdistNotices(), Time: when, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	dc, _ := os.ReadFile(c)
	zr, _ := gzip.NewReader(bytes.NewReader(dc))
	h, err := tar.NewReader(zr).Next()
	if err != nil || !h.ModTime.Equal(time.Unix(1700000000, 0)) || h.Uid != 0 || h.Gid != 0 {
		t.Fatalf("with SOURCE_DATE_EPOCH=1700000000 the first entry is %+v (%v)", h, err)
	}
	if _, err := SourceDate("yesterday"); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
		t.Fatalf("SOURCE_DATE_EPOCH=yesterday: got %v", err)
	}
}

func sdistEntry(t *testing.T, data []byte, name string) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.HasSuffix(h.Name, "/"+name) {
			b, _ := io.ReadAll(tr)
			return b
		}
	}
}

// TestWriteSdistRefuses: a file name that leaves the sdist, a file given
// twice, one the sdist writes itself, or a missing go.mod, LICENSE or
// backend is refused, as is a version that is not PEP 440.
func TestWriteSdistRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version string
		edit    func([]SourceFile) []SourceFile
		want    string
	}{
		{"parent", "1.0", func(f []SourceFile) []SourceFile { return append(f, SourceFile{Name: "../x.go"}) }, "bad file name"},
		{"absolute", "1.0", func(f []SourceFile) []SourceFile { return append(f, SourceFile{Name: "/etc/passwd"}) }, "bad file name"},
		{"twice", "1.0", func(f []SourceFile) []SourceFile { return append(f, f[0]) }, "given twice"},
		{"PKG-INFO", "1.0", func(f []SourceFile) []SourceFile { return append(f, SourceFile{Name: "PKG-INFO"}) }, "written by the sdist itself"},
		{"no LICENSE", "1.0", func(f []SourceFile) []SourceFile { return append(f[:1], f[2:]...) }, "no LICENSE"},
		{"no backend", "1.0", func(f []SourceFile) []SourceFile { return f[:3] }, "no " + BackendPath},
		{"version", "1.0-beta", func(f []SourceFile) []SourceFile { return f }, "not a canonical PEP 440 version"},
		{"notice over a module file", "1.0", func(f []SourceFile) []SourceFile {
			return append(f, SourceFile{Name: "third_party/std/LICENSE", Data: []byte("x")})
		}, "both a module file and a notice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := WriteSdist(SdistOptions{Version: tc.version, Files: tc.edit(sdistFiles()), Notices: sdistNotices(), Dir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestVerifySdistRefuses: VerifySdist fails on an sdist a plain tar would
// make: entries owned by a user, a gzip header with a time, a file outside
// the top-level directory.
func TestVerifySdistRefuses(t *testing.T) {
	write := func(t *testing.T, mtime time.Time, entries ...tar.Header) string {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.ModTime = mtime
		tw := tar.NewWriter(zw)
		for _, h := range entries {
			h.Typeflag, h.Mode = tar.TypeReg, 0o644
			tw.WriteHeader(&h)
		}
		tw.Close()
		zw.Close()
		p := filepath.Join(t.TempDir(), "megane_jupyter_bridge-1.0.tar.gz")
		os.WriteFile(p, buf.Bytes(), 0o644)
		return p
	}
	for _, tc := range []struct {
		name    string
		mtime   time.Time
		entries []tar.Header
		want    string
	}{
		{"gzip time", time.Unix(1700000000, 0), []tar.Header{{Name: "megane_jupyter_bridge-1.0/PKG-INFO"}}, "gzip header"},
		{"owner", time.Time{}, []tar.Header{{Name: "megane_jupyter_bridge-1.0/PKG-INFO", Uid: 1000, Uname: "me"}}, "not 0:0"},
		{"outside", time.Time{}, []tar.Header{{Name: "other/PKG-INFO"}}, "not inside"},
		{"order", time.Time{}, []tar.Header{{Name: "megane_jupyter_bridge-1.0/b"}, {Name: "megane_jupyter_bridge-1.0/a"}}, "out of order"},
		{"no PKG-INFO", time.Time{}, []tar.Header{{Name: "megane_jupyter_bridge-1.0/go.mod"}}, "no megane_jupyter_bridge-1.0/PKG-INFO"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := VerifySdist(write(t, tc.mtime, tc.entries...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if _, err := VerifySdist(filepath.Join(t.TempDir(), "megane-jupyter-bridge-1.0.tar.gz")); err == nil || !strings.Contains(err.Error(), "PEP 625") {
		t.Fatalf("an unnormalized name: got %v", err)
	}
}
