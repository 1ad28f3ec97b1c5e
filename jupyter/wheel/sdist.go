package wheel

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// The source distribution's build: pyproject.toml names the in-tree PEP 517
// backend (a stdlib-only Python file at BackendPath/BackendModule.py), which
// runs go run ./cmd/internal/mkwheel for the host.
const (
	BackendPath   = "jupyter/wheel/pep517"
	BackendModule = "megane_build_backend"
	// CommitFile is the sdist's file holding the commit it was made from
	// (a checkout has no such file: mkwheel asks git). mkwheel stamps it
	// into the binary, so a wheel built from the sdist says the same
	// commit as one built from the checkout.
	CommitFile = "COMMIT"
)

// SdistName is the source distribution's file name for version (PEP 625:
// the normalized name, .tar.gz); its one top-level directory is the same
// without .tar.gz.
func SdistName(version string) string {
	return Package + "-" + version + ".tar.gz"
}

// SourceFile is one file of the module put in the sdist: Name is its
// slash-separated path from the module's root.
type SourceFile struct {
	Name string
	Data []byte
	Mode fs.FileMode // 0o644 or 0o755; 0 means 0o644
}

// SdistOptions says which sdist to write. Version and Files are required.
type SdistOptions struct {
	// Version is the binary's version, as for the wheels.
	Version string
	// Files are the module's files the build needs. They must include
	// go.mod, LICENSE and the backend; PKG-INFO, pyproject.toml and
	// CommitFile are written here and may not be among them.
	Files []SourceFile
	// Notices are the licence files of what the binaries built from the
	// sdist link, for every platform (Options.Notices), put in the sdist
	// at their Name (NoticeDir/...) and named by License-File lines.
	// Required, as for the wheels.
	Notices []Notice
	// Commit is written to CommitFile; "" writes no CommitFile.
	Commit string
	// Time is every entry's modification time (whole seconds); the zero
	// Time means SourceDate("").
	Time time.Time
	// Dir is the directory the sdist is written into (made if missing);
	// "" means the current directory.
	Dir    string
	Logger *slog.Logger
}

// SourceDate is the sdist's entry time: SOURCE_DATE_EPOCH's value
// (seconds since 1970) when epoch is not empty, else the wheels' fixed
// 1980-01-01.
func SourceDate(epoch string) (time.Time, error) {
	if epoch == "" {
		return modTime, nil
	}
	n, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds since 1970", epoch)
	}
	return time.Unix(n, 0).UTC(), nil
}

// WriteSdist writes the source distribution opts describes and returns its
// path. The same options give the same bytes: entries sorted by name,
// regular files only, owned by uid and gid 0 with no user or group names,
// all at opts.Time; a gzip header with no file name and no time.
func WriteSdist(opts SdistOptions) (string, error) {
	log := orDiscard(opts.Logger)
	if err := checkVersion(opts.Version); err != nil {
		return "", err
	}
	t := opts.Time
	if t.IsZero() {
		t = modTime
	}
	t = t.Truncate(time.Second)
	files := map[string]SourceFile{}
	for _, f := range opts.Files {
		if !fs.ValidPath(f.Name) || f.Name == "." || strings.Contains(f.Name, "\\") {
			return "", fmt.Errorf("sdist: bad file name %q (a slash-separated path inside the module)", f.Name)
		}
		if _, dup := files[f.Name]; dup {
			return "", fmt.Errorf("sdist: %s given twice", f.Name)
		}
		switch f.Name {
		case "PKG-INFO", "pyproject.toml", CommitFile:
			return "", fmt.Errorf("sdist: %s is written by the sdist itself, not taken from the module", f.Name)
		}
		if f.Mode == 0 {
			f.Mode = 0o644
		}
		files[f.Name] = f
	}
	for _, need := range []string{"go.mod", "LICENSE", BackendPath + "/" + BackendModule + ".py"} {
		if _, ok := files[need]; !ok {
			return "", fmt.Errorf("sdist: no %s among the files", need)
		}
	}
	notices, err := sortedNotices(opts.Notices)
	if err != nil {
		return "", err
	}
	if !slices.ContainsFunc(notices, func(n Notice) bool { return n.Module == StdModule }) {
		return "", errors.New("sdist: no notice for Go's standard library, which every binary links (SdistOptions.Notices)")
	}
	for _, n := range notices {
		if _, dup := files[n.Name()]; dup {
			return "", fmt.Errorf("sdist: %s is both a module file and a notice", n.Name())
		}
		files[n.Name()] = SourceFile{n.Name(), n.Data, 0o644}
	}
	var readme []byte
	if f, ok := files["README.md"]; ok {
		readme = f.Data
	}
	desc, err := describe(opts.Version, notices, readme)
	if err != nil {
		return "", err
	}
	files["PKG-INFO"] = SourceFile{"PKG-INFO", desc.metadata(), 0o644}
	files["pyproject.toml"] = SourceFile{"pyproject.toml", desc.pyproject(), 0o644}
	if opts.Commit != "" {
		files[CommitFile] = SourceFile{CommitFile, []byte(opts.Commit + "\n"), 0o644}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)

	top := strings.TrimSuffix(SdistName(opts.Version), ".tar.gz")
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // zero Header: no name, MTIME 0
	tw := tar.NewWriter(zw)
	for _, n := range names {
		f := files[n]
		h := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     top + "/" + n,
			Size:     int64(len(f.Data)),
			Mode:     int64(f.Mode.Perm()),
			ModTime:  t,
			Format:   tar.FormatPAX,
		}
		if err := tw.WriteHeader(h); err != nil {
			return "", fmt.Errorf("sdist: %s: %w", n, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return "", fmt.Errorf("sdist: %s: %w", n, err)
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	dir := opts.Dir
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	p := filepath.Join(dir, SdistName(opts.Version))
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	log.Info("sdist written", "path", p, "version", opts.Version, "files", len(names), "bytes", buf.Len())
	return p, nil
}

// pyproject is the sdist's pyproject.toml: the in-tree backend, and the
// same metadata as PKG-INFO and the wheels' METADATA.
func (d description) pyproject() []byte {
	var b strings.Builder
	b.WriteString("# megane-jupyter-bridge's source distribution: building a wheel runs\n" +
		"# `go run ./cmd/internal/mkwheel` for this machine (the backend below, stdlib\n" +
		"# only), so Go (go.mod's toolchain line or later) must be on PATH; nothing\n" +
		"# is downloaded but Go modules and, with GOTOOLCHAIN=auto, that Go.\n")
	fmt.Fprintf(&b, "[build-system]\nrequires = []\nbuild-backend = %q\nbackend-path = [%q]\n\n", BackendModule, BackendPath)
	fmt.Fprintf(&b, "[project]\nname = %q\nversion = %q\ndescription = %q\n", Name, d.version, Summary)
	if d.readme != nil {
		b.WriteString("readme = \"README.md\"\n")
	}
	fmt.Fprintf(&b, "license = %q\nlicense-files = [\n", d.licence)
	for _, f := range d.files {
		fmt.Fprintf(&b, "  %q,\n", f)
	}
	fmt.Fprintf(&b, "]\nrequires-python = %q\ndependencies = [%q]\nclassifiers = [\n", RequiresPython, RequiresDist)
	for _, c := range classifiers() {
		fmt.Fprintf(&b, "  %q,\n", c)
	}
	b.WriteString("]\n\n[project.urls]\n")
	for _, u := range projectURLs() {
		fmt.Fprintf(&b, "%s = %q\n", u[0], u[1])
	}
	fmt.Fprintf(&b, "\n[project.scripts]\n%s = \"%s:main\"\n\n", Name, Package)
	fmt.Fprintf(&b, "[project.entry-points.%s]\n%s = \"%s:setup_megane\"\n", EntryPointGroup, jupyter.ProxyServerName, Package)
	return []byte(b.String())
}

// SdistInfo is what VerifySdist read from an sdist.
type SdistInfo struct {
	Name, Version string
	Metadata      map[string]string      // PKG-INFO's headers (the last of repeated ones)
	LicenseFiles  []string               // PKG-INFO's License-File lines
	Files         map[string]fs.FileMode // paths inside the top-level directory
	Commit        string                 // CommitFile's line, "" without one
	Toolchain     string                 // go.mod's toolchain line (go1.27.3), "" without one
	Pyproject     PyprojectTOML
}

// PyprojectTOML is the part of pyproject.toml VerifySdist checks.
type PyprojectTOML struct {
	BuildSystem struct {
		Requires     []string `toml:"requires"`
		BuildBackend string   `toml:"build-backend"`
		BackendPath  []string `toml:"backend-path"`
	} `toml:"build-system"`
	Project struct {
		Name         string   `toml:"name"`
		Version      string   `toml:"version"`
		License      string   `toml:"license"`
		LicenseFiles []string `toml:"license-files"`
		Dependencies []string `toml:"dependencies"`
	} `toml:"project"`
}

// VerifySdist reads the sdist at p and checks what WriteSdist promises and
// what pip and PyPI need: the PEP 625 file name, one top-level directory
// named like it, regular files only, owned by 0:0, in sorted order, at one
// time; a gzip header without name or time; PKG-INFO naming the same
// project and version as the file name, and the licence file it names;
// pyproject.toml naming the in-tree backend, whose file is present, and
// the same name and version.
func VerifySdist(p string) (*SdistInfo, error) {
	base := filepath.Base(p)
	top, ok := strings.CutSuffix(base, ".tar.gz")
	name, v, ok2 := strings.Cut(top, "-")
	if !ok || !ok2 || name != Package || !version.MatchString(v) {
		return nil, fmt.Errorf("%s: not a %s-VERSION.tar.gz file name (PEP 625)", p, Package)
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: not gzip: %w", p, err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		return nil, fmt.Errorf("%s: the gzip header has a name (%q) or a time (%v): not reproducible", p, zr.Name, zr.ModTime)
	}
	info := &SdistInfo{Name: name, Version: v, Metadata: map[string]string{}, Files: map[string]fs.FileMode{}}
	contents := map[string][]byte{}
	tr := tar.NewReader(zr)
	var prev string
	var when time.Time
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		rel, ok := strings.CutPrefix(h.Name, top+"/")
		switch {
		case !ok || !fs.ValidPath(rel):
			return nil, fmt.Errorf("%s: %s is not inside %s/", p, h.Name, top)
		case h.Typeflag != tar.TypeReg:
			return nil, fmt.Errorf("%s: %s is not a regular file (type %q)", p, h.Name, h.Typeflag)
		case h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "":
			return nil, fmt.Errorf("%s: %s is owned by %d:%d (%s:%s), not 0:0", p, h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
		case rel <= prev:
			return nil, fmt.Errorf("%s: %s is out of order or repeated (after %s)", p, rel, prev)
		case !when.IsZero() && !h.ModTime.Equal(when):
			return nil, fmt.Errorf("%s: %s has time %v, the others %v", p, rel, h.ModTime, when)
		}
		prev, when = rel, h.ModTime
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", p, rel, err)
		}
		contents[rel] = data
		info.Files[rel] = fs.FileMode(h.Mode).Perm()
	}
	pkgInfo, ok := contents["PKG-INFO"]
	if !ok {
		return nil, fmt.Errorf("%s: no %s/PKG-INFO", p, top)
	}
	head, _, _ := strings.Cut(string(pkgInfo), "\n\n")
	for _, line := range strings.Split(head, "\n") {
		if k, val, ok := strings.Cut(line, ": "); ok {
			info.Metadata[k] = val
			if k == "License-File" {
				info.LicenseFiles = append(info.LicenseFiles, val)
			}
		}
	}
	if info.Metadata["Name"] != Name || info.Metadata["Version"] != v {
		return nil, fmt.Errorf("%s: PKG-INFO names %s %s, the file name %s %s", p, info.Metadata["Name"], info.Metadata["Version"], Name, v)
	}
	if len(info.LicenseFiles) == 0 {
		return nil, fmt.Errorf("%s: PKG-INFO names no License-File", p)
	}
	for _, lf := range info.LicenseFiles {
		if contents[lf] == nil {
			return nil, fmt.Errorf("%s: PKG-INFO's License-File %q is not in the sdist", p, lf)
		}
	}
	pp, ok := contents["pyproject.toml"]
	if !ok {
		return nil, fmt.Errorf("%s: no %s/pyproject.toml", p, top)
	}
	if _, err := toml.Decode(string(pp), &info.Pyproject); err != nil {
		return nil, fmt.Errorf("%s: pyproject.toml: %w", p, err)
	}
	bs := info.Pyproject.BuildSystem
	if len(bs.Requires) != 0 || len(bs.BackendPath) != 1 || bs.BuildBackend == "" {
		return nil, fmt.Errorf("%s: pyproject.toml's [build-system] is not requires = [], one backend-path and a build-backend", p)
	}
	if backend := path.Join(bs.BackendPath[0], bs.BuildBackend+".py"); contents[backend] == nil {
		return nil, fmt.Errorf("%s: the build backend %s is not in the sdist", p, backend)
	}
	if info.Pyproject.Project.Name != Name || info.Pyproject.Project.Version != v {
		return nil, fmt.Errorf("%s: pyproject.toml names %s %s, the file name %s %s", p, info.Pyproject.Project.Name, info.Pyproject.Project.Version, Name, v)
	}
	if pr := info.Pyproject.Project; pr.License != info.Metadata["License-Expression"] || !slices.Equal(pr.LicenseFiles, info.LicenseFiles) {
		return nil, fmt.Errorf("%s: pyproject.toml's license %q and license-files %v differ from PKG-INFO's %q and %v", p, pr.License, pr.LicenseFiles, info.Metadata["License-Expression"], info.LicenseFiles)
	}
	if contents["go.mod"] == nil {
		return nil, errors.New(p + ": no go.mod: the sdist cannot build the binary")
	}
	if m := regexp.MustCompile(`(?m)^toolchain (go\S+)\r?$`).FindSubmatch(contents["go.mod"]); m != nil {
		info.Toolchain = string(m[1])
	}
	if c, ok := contents[CommitFile]; ok {
		info.Commit = strings.TrimSpace(string(c))
	}
	return info, nil
}
