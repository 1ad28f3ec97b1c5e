// Package wheel writes the bridge's Python wheels: one zip per platform
// holding the statically linked bridge binary, the small Python package
// megane_jupyter_bridge (embedded from this directory) whose
// jupyter_serverproxy_servers entry point registers that binary with
// jupyter-server-proxy, and the *.dist-info metadata pip reads. It also
// reads a wheel back and checks its RECORD (Verify). It writes the source
// distribution too (WriteSdist, sdist.go): the module's files it is given,
// PKG-INFO and a pyproject.toml naming the in-tree PEP 517 backend
// (pep517/megane_build_backend.py), as reproducible bytes; VerifySdist
// reads one back.
//
// It owns the wheel's and the sdist's layout, the wheel's platform tags
// (taken from the binary itself) and the metadata of both. It never builds
// binaries, never chooses the sdist's files (mkwheel asks go list and git),
// never runs Python and never installs anything.
package wheel

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"embed"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// Distribution metadata. Name is the project's name; the wheel's file and
// its import package use the normalized Package.
const (
	Name    = "megane-jupyter-bridge"
	Package = "megane_jupyter_bridge"
	// EntryPointGroup is the entry-point group jupyter-server-proxy reads
	// servers from; the bridge's entry point there is named
	// jupyter.ProxyServerName.
	EntryPointGroup = "jupyter_serverproxy_servers"
	// RequiresDist is the one runtime requirement: what starts the bridge.
	RequiresDist = "jupyter-server-proxy>=4"
	// RequiresPython is the oldest Python CI tests the wheel with (the
	// GitHub workflow's lowest; TestRequiresPythonTested).
	RequiresPython = ">=3.9"
	// License is the bridge's own licence as an SPDX expression (the
	// repository's LICENSE). METADATA's License-Expression (PEP 639) is
	// this AND the licences of what the binary links (LicenseExpression).
	License = "MIT"
	Summary = "Relays MCP tool servers to JupyterLab's Megane Builder over one WebSocket, started by jupyter-server-proxy"
	// Repository is the project's home; README links become links into it
	// at the release's tag in the long description.
	Repository = "https://github.com/megane-labs/megane-jupyter-bridge"
)

// classifiers are METADATA's Trove classifiers (no licence classifiers:
// PEP 639 replaces them with License-Expression, and PyPI refuses both).
func classifiers() []string {
	return []string{
		"Development Status :: 3 - Alpha",
		"Framework :: Jupyter",
		"Framework :: Jupyter :: JupyterLab",
		"Intended Audience :: Science/Research",
		"Operating System :: MacOS",
		"Operating System :: Microsoft :: Windows",
		"Operating System :: POSIX :: Linux",
		"Programming Language :: Go",
		"Programming Language :: Python :: 3",
		"Topic :: Scientific/Engineering :: Chemistry",
	}
}

// projectURLs are METADATA's Project-URL lines (label, URL).
func projectURLs() [][2]string {
	return [][2]string{
		{"Homepage", Repository},
		{"Source", Repository},
		{"Issues", Repository + "/issues"},
		{"Changelog", Repository + "/releases"},
	}
}

// Platforms are the GOOS/GOARCH pairs a wheel can be written for.
var Platforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64"}

//go:embed megane_jupyter_bridge/*.py
var pythonSources embed.FS

// modTime is every zip entry's time, so that the same inputs give the same
// wheel.
var modTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// version is a PEP 440 public version in its canonical form (release,
// optional pre-release, post-release and dev-release segments).
var version = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?$`)

// Options says which wheel to write. Version, Platform and Binary are
// required.
type Options struct {
	// Version is the binary's version (what its version command prints),
	// a canonical PEP 440 version such as 0.1.0.
	Version string
	// Platform is the binary's GOOS/GOARCH, one of Platforms.
	Platform string
	// Binary is the file of the statically linked bridge binary for
	// Platform.
	Binary string
	// Dir is the directory the wheel is written into (made if missing);
	// "" means the current directory.
	Dir string
	// LicenseText is the licence file put in the wheel
	// (*.dist-info/licenses/LICENSE, named by METADATA's License-File).
	// Required: a wheel without its licence may not be published.
	LicenseText []byte
	// Notices are the licence files of what Binary links (Go's standard
	// library and every module), put beside LICENSE and named by
	// License-File lines; their licences join License-Expression.
	// Required: at least Go's own (StdModule).
	Notices []Notice
	// Readme is the long description (Markdown: the repository's
	// README.md, its relative links made absolute at the release's tag).
	// Nil writes a short plain-text one.
	Readme []byte
	// Logger receives one info record per wheel written. Nil discards.
	Logger *slog.Logger
}

// Write writes the wheel that opts describes and returns its path. The
// binary must be for opts.Platform (and, on Linux, statically linked):
// its platform tag is read from it.
func Write(opts Options) (string, error) {
	log := orDiscard(opts.Logger)
	if err := checkVersion(opts.Version); err != nil {
		return "", err
	}
	if len(opts.LicenseText) == 0 {
		return "", errors.New("no licence text: pass the repository's LICENSE (Options.LicenseText)")
	}
	notices, err := sortedNotices(opts.Notices)
	if err != nil {
		return "", err
	}
	if !slices.ContainsFunc(notices, func(n Notice) bool { return n.Module == StdModule }) {
		return "", errors.New("no notice for Go's standard library, which every binary links: pass GOROOT's LICENSE (Options.Notices)")
	}
	desc, err := describe(opts.Version, notices, opts.Readme)
	if err != nil {
		return "", err
	}
	bin, err := os.ReadFile(opts.Binary)
	if err != nil {
		return "", fmt.Errorf("read the binary: %w", err)
	}
	tags, err := Tags(opts.Platform, bin)
	if err != nil {
		return "", fmt.Errorf("%s: %w", opts.Binary, err)
	}
	goos, _, _ := strings.Cut(opts.Platform, "/")
	binName := "megane-jupyter-bridge"
	if goos == "windows" {
		binName += ".exe"
	}
	reg := jupyter.Registration("", "", false)
	reg.Command = reg.Command[1:] // the package puts its binary's path first
	regJSON, err := json.MarshalIndent(reg, "", "  ")
	if err != nil {
		return "", err
	}

	distInfo := Package + "-" + opts.Version + ".dist-info"
	type file struct {
		name string
		data []byte
		mode fs.FileMode
	}
	var files []file
	sources, _ := fs.Glob(pythonSources, Package+"/*.py")
	for _, s := range sources {
		data, _ := pythonSources.ReadFile(s)
		files = append(files, file{s, data, 0o644})
	}
	files = append(files,
		file{Package + "/registration.json", append(regJSON, '\n'), 0o644},
		file{Package + "/bin/" + binName, bin, 0o755},
		file{distInfo + "/METADATA", desc.metadata(), 0o644},
		file{distInfo + "/WHEEL", wheelFile(opts.Version, tags), 0o644},
		file{distInfo + "/entry_points.txt", entryPoints(), 0o644},
		file{distInfo + "/licenses/LICENSE", opts.LicenseText, 0o644},
	)
	for _, n := range notices {
		files = append(files, file{distInfo + "/licenses/" + n.Name(), n.Data, 0o644})
	}

	name := fmt.Sprintf("%s-%s-py3-none-%s.whl", Package, opts.Version, strings.Join(tags, "."))
	dir := opts.Dir
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	path := filepath.Join(dir, name)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record bytes.Buffer
	rw := csv.NewWriter(&record)
	add := func(name string, data []byte, mode fs.FileMode) error {
		h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: modTime}
		h.SetMode(mode) // unix permissions in the external attributes: pip keeps the executable bit
		w, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	for _, f := range files {
		if err := add(f.name, f.data, f.mode); err != nil {
			return "", fmt.Errorf("write %s: %w", path, err)
		}
		rw.Write([]string{f.name, "sha256=" + digest(f.data), strconv.Itoa(len(f.data))})
	}
	rw.Write([]string{distInfo + "/RECORD", "", ""})
	rw.Flush()
	if err := add(distInfo+"/RECORD", record.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	log.Info("wheel written", "path", path, "platform", opts.Platform, "version", opts.Version, "bytes", buf.Len())
	return path, nil
}

// checkVersion refuses a version that is not a canonical PEP 440 one.
func checkVersion(v string) error {
	if !version.MatchString(v) {
		return fmt.Errorf("version %q is not a canonical PEP 440 version (such as 0.1.0); change the version constant in cmd/megane-jupyter-bridge/main.go", v)
	}
	return nil
}

// orDiscard is log, or a logger that discards when log is nil.
func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

// digest is RECORD's hash of data: sha256, urlsafe base64 without padding.
func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// description is what METADATA and the sdist's PKG-INFO and
// pyproject.toml say besides the fixed constants.
type description struct {
	version string
	licence string   // License-Expression
	files   []string // License-File lines: LICENSE, then the notices'
	readme  []byte   // the long description (Markdown), nil for the short one
}

func describe(version string, notices []Notice, readme []byte) (description, error) {
	licence, err := LicenseExpression(notices)
	if err != nil {
		return description{}, err
	}
	d := description{version: version, licence: licence, files: []string{"LICENSE"}}
	for _, n := range notices {
		d.files = append(d.files, n.Name())
	}
	if readme != nil {
		d.readme = absoluteLinks(readme, "v"+version)
	}
	return d, nil
}

// markdownLink is a Markdown link or image: [text](target) or
// [text](target "title"), with a leading ! for an image.
var markdownLink = regexp.MustCompile(`(!?\[[^\]]*\])\(([^)\s]+)((?:\s+"[^"]*")?)\)`)

// absoluteLinks makes the relative link targets of a Markdown document
// absolute: links into the repository's tree at tag, images to their raw
// files there (PyPI shows the long description away from the
// repository). Absolute URLs and in-page anchors are kept.
func absoluteLinks(md []byte, tag string) []byte {
	return markdownLink.ReplaceAllFunc(md, func(m []byte) []byte {
		sub := markdownLink.FindSubmatch(m)
		text, target := string(sub[1]), string(sub[2])
		if strings.HasPrefix(target, "#") || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			return m
		}
		base := Repository + "/blob/" + tag + "/"
		if strings.HasPrefix(text, "!") {
			base = strings.Replace(Repository, "https://github.com/", "https://raw.githubusercontent.com/", 1) + "/" + tag + "/"
		}
		return []byte(text + "(" + base + strings.TrimPrefix(target, "./") + string(sub[3]) + ")")
	})
}

func (d description) metadata() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "Metadata-Version: 2.4\nName: %s\nVersion: %s\nSummary: %s\nLicense-Expression: %s\n", Name, d.version, Summary, d.licence)
	for _, f := range d.files {
		fmt.Fprintf(&b, "License-File: %s\n", f)
	}
	for _, u := range projectURLs() {
		fmt.Fprintf(&b, "Project-URL: %s, %s\n", u[0], u[1])
	}
	for _, c := range classifiers() {
		fmt.Fprintf(&b, "Classifier: %s\n", c)
	}
	fmt.Fprintf(&b, "Requires-Python: %s\nRequires-Dist: %s\n", RequiresPython, RequiresDist)
	if d.readme != nil {
		b.WriteString("Description-Content-Type: text/markdown\n\n")
		b.Write(d.readme)
		return []byte(b.String())
	}
	b.WriteString("Description-Content-Type: text/plain\n\n")
	fmt.Fprintf(&b, "The megane-jupyter-bridge binary, registered with jupyter-server-proxy through its\n"+
		"%s entry point %q: installing this wheel into the environment that runs\n"+
		"Jupyter (with jupyter-server-proxy) is the whole installation. The console script\n"+
		"megane-jupyter-bridge runs the same binary (doctor, servers, check, ...).\n", EntryPointGroup, jupyter.ProxyServerName)
	return []byte(b.String())
}

func wheelFile(v string, tags []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "Wheel-Version: 1.0\nGenerator: megane-jupyter-bridge mkwheel %s\nRoot-Is-Purelib: false\n", v)
	for _, t := range tags {
		fmt.Fprintf(&b, "Tag: py3-none-%s\n", t)
	}
	return []byte(b.String())
}

func entryPoints() []byte {
	return fmt.Appendf(nil, "[console_scripts]\nmegane-jupyter-bridge = %s:main\n\n[%s]\n%s = %s:setup_megane\n",
		Package, EntryPointGroup, jupyter.ProxyServerName, Package)
}

// Tags returns the platform tags of a wheel holding bin, the bridge built
// for platform (GOOS/GOARCH), after checking that bin is that platform's
// executable:
//   - Linux: the binary must be static (no interpreter, no shared
//     libraries), so it runs on any glibc or musl system with Go's minimum
//     kernel: manylinux2014 (glibc 2.17) and musllinux_1_1.
//   - macOS: the minimum macOS version the binary declares
//     (LC_BUILD_VERSION; Go 1.26's linker writes 12.0, Go 1.27's 13.0).
//   - Windows: win_amd64.
func Tags(platform string, bin []byte) ([]string, error) {
	goos, goarch, _ := strings.Cut(platform, "/")
	r := bytes.NewReader(bin)
	switch goos {
	case "linux":
		arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[goarch]
		machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[goarch]
		if arch == "" {
			break
		}
		f, err := elf.NewFile(r)
		if err != nil {
			return nil, fmt.Errorf("not a Linux executable: %w", err)
		}
		if f.Machine != machine {
			return nil, fmt.Errorf("built for %s, not %s", f.Machine, platform)
		}
		libs, _ := f.ImportedLibraries()
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				libs = append(libs, "an interpreter")
			}
		}
		if len(libs) > 0 {
			return nil, fmt.Errorf("not statically linked (it needs %s): build it with CGO_ENABLED=0", strings.Join(libs, ", "))
		}
		return []string{"manylinux_2_17_" + arch, "manylinux2014_" + arch, "musllinux_1_1_" + arch}, nil
	case "darwin":
		arch := map[string]string{"amd64": "x86_64", "arm64": "arm64"}[goarch]
		cpu := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[goarch]
		if arch == "" {
			break
		}
		f, err := macho.NewFile(r)
		if err != nil {
			return nil, fmt.Errorf("not a macOS executable: %w", err)
		}
		if f.Cpu != cpu {
			return nil, fmt.Errorf("built for %s, not %s", f.Cpu, platform)
		}
		major, minor, err := macOSMinimum(f)
		if err != nil {
			return nil, err
		}
		if major >= 11 {
			minor = 0 // pip matches macOS 11 and later by major version only
		}
		return []string{fmt.Sprintf("macosx_%d_%d_%s", major, minor, arch)}, nil
	case "windows":
		if goarch != "amd64" {
			break
		}
		f, err := pe.NewFile(r)
		if err != nil {
			return nil, fmt.Errorf("not a Windows executable: %w", err)
		}
		if f.Machine != pe.IMAGE_FILE_MACHINE_AMD64 {
			return nil, fmt.Errorf("built for machine %#x, not %s", f.Machine, platform)
		}
		return []string{"win_amd64"}, nil
	}
	return nil, fmt.Errorf("no wheel platform for %q; use one of %s", platform, strings.Join(Platforms, ", "))
}

// Mach-O load commands that carry the minimum macOS version.
const (
	lcVersionMinMacOSX = 0x24
	lcBuildVersion     = 0x32
)

// macOSMinimum reads the minimum macOS version from f's load commands.
func macOSMinimum(f *macho.File) (major, minor int, err error) {
	for _, l := range f.Loads {
		raw := l.Raw()
		if len(raw) < 16 {
			continue
		}
		var v uint32
		switch f.ByteOrder.Uint32(raw) {
		case lcBuildVersion: // cmd, cmdsize, platform, minos, sdk, ntools
			v = f.ByteOrder.Uint32(raw[12:])
		case lcVersionMinMacOSX: // cmd, cmdsize, version, sdk
			v = f.ByteOrder.Uint32(raw[8:])
		default:
			continue
		}
		return int(v >> 16), int(v >> 8 & 0xff), nil // xxxx.yy.zz
	}
	return 0, 0, errors.New("the binary names no minimum macOS version (no LC_BUILD_VERSION)")
}

// Info is what Verify read from a wheel.
type Info struct {
	Name, Version string
	Tags          []string          // the WHEEL file's Tag lines, without "py3-none-"
	Metadata      map[string]string // METADATA's headers (the last of repeated ones)
	RequiresDist  []string
	Files         map[string]fs.FileMode // every file but RECORD, with its unix mode
	EntryPoints   string                 // entry_points.txt
	LicenseFiles  []string               // METADATA's License-File lines
	// GoVersion is the Go that built the binary (its build information,
	// as go version -m reads it), Linked the modules it links.
	GoVersion string
	Linked    []string          // StdModule, then each module's path
	Deps      map[string]string // each linked module's version
}

// Verify reads the wheel at path and checks it as an installer would: the
// file name's parts match the metadata, every file is listed in RECORD
// with its sha256 and size, RECORD lists nothing that is missing, and
// RECORD's own line has no hash. It checks the licences as a distributor
// would: every License-File is in *.dist-info/licenses/, and Go's and
// every module the binary links (read from the binary's build
// information) have their licence files there and their licence in
// License-Expression.
func Verify(path string) (*Info, error) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer zr.Close()
	base := strings.TrimSuffix(filepath.Base(path), ".whl")
	parts := strings.Split(base, "-")
	if len(parts) != 5 || parts[2] != "py3" || parts[3] != "none" {
		return nil, fmt.Errorf("%s: not a name-version-py3-none-platform.whl file name", path)
	}
	info := &Info{Name: parts[0], Version: parts[1], Metadata: map[string]string{}, Files: map[string]fs.FileMode{}}
	distInfo := parts[0] + "-" + parts[1] + ".dist-info/"
	contents := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, f.Name, err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, f.Name, err)
		}
		if _, dup := contents[f.Name]; dup {
			return nil, fmt.Errorf("%s: %s is in the zip twice", path, f.Name)
		}
		contents[f.Name] = data
		if f.Name != distInfo+"RECORD" {
			info.Files[f.Name] = f.Mode()
		}
	}
	record, ok := contents[distInfo+"RECORD"]
	if !ok {
		return nil, fmt.Errorf("%s: no %sRECORD", path, distInfo)
	}
	rows, err := ParseRecord(record)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	listed := map[string]bool{}
	for _, r := range rows {
		listed[r.Path] = true
		data, ok := contents[r.Path]
		switch {
		case !ok:
			return nil, fmt.Errorf("%s: RECORD lists %s, which is not in the wheel", path, r.Path)
		case r.Path == distInfo+"RECORD":
			if r.Hash != "" || r.Size != -1 {
				return nil, fmt.Errorf("%s: RECORD's own line has a hash or size", path)
			}
		case r.Hash != "sha256="+digest(data) || r.Size != int64(len(data)):
			return nil, fmt.Errorf("%s: %s does not match its RECORD line", path, r.Path)
		}
	}
	for name := range contents {
		if !listed[name] {
			return nil, fmt.Errorf("%s: %s is not listed in RECORD", path, name)
		}
	}
	for _, line := range strings.Split(string(contents[distInfo+"WHEEL"]), "\n") {
		if t, ok := strings.CutPrefix(line, "Tag: py3-none-"); ok {
			info.Tags = append(info.Tags, t)
		}
	}
	if strings.Join(info.Tags, ".") != parts[4] {
		return nil, fmt.Errorf("%s: WHEEL's tags %v differ from the file name's %s", path, info.Tags, parts[4])
	}
	head, _, _ := strings.Cut(string(contents[distInfo+"METADATA"]), "\n\n")
	for _, line := range strings.Split(head, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		info.Metadata[k] = v
		switch k {
		case "Requires-Dist":
			info.RequiresDist = append(info.RequiresDist, v)
		case "License-File":
			info.LicenseFiles = append(info.LicenseFiles, v)
		}
	}
	if info.Metadata["Version"] != info.Version || strings.ReplaceAll(info.Metadata["Name"], "-", "_") != info.Name {
		return nil, fmt.Errorf("%s: METADATA names %s %s, the file name %s %s", path, info.Metadata["Name"], info.Metadata["Version"], info.Name, info.Version)
	}
	for _, lf := range info.LicenseFiles {
		if contents[distInfo+"licenses/"+lf] == nil {
			return nil, fmt.Errorf("%s: METADATA's License-File %s is not in %slicenses/", path, lf, distInfo)
		}
	}
	info.EntryPoints = string(contents[distInfo+"entry_points.txt"])
	var bin []byte
	for name, data := range contents {
		if strings.HasPrefix(name, Package+"/bin/") {
			bin = data
		}
	}
	if bin == nil {
		return nil, fmt.Errorf("%s: no binary in %s/bin/", path, Package)
	}
	bi, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		return nil, fmt.Errorf("%s: the binary's build information: %w", path, err)
	}
	info.GoVersion = bi.GoVersion
	info.Linked = append(info.Linked, StdModule)
	info.Deps = map[string]string{}
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		info.Linked = append(info.Linked, d.Path)
		info.Deps[d.Path] = d.Version
	}
	if err := checkNotices(info.Linked, info.LicenseFiles, info.Metadata["License-Expression"]); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return info, nil
}

// checkNotices checks that each linked module (StdModule for Go) has a
// licence file among files and its recorded licence in expr.
func checkNotices(linked, files []string, expr string) error {
	ids := map[string]bool{}
	for _, id := range strings.Split(expr, " AND ") {
		ids[id] = true
	}
	for _, m := range linked {
		if !slices.ContainsFunc(files, func(f string) bool { return strings.HasPrefix(f, NoticeDir+"/"+m+"/") }) {
			return fmt.Errorf("the binary links %s, but no licence file of it is in the distribution (%s/%s/)", m, NoticeDir, m)
		}
		lic := ModuleLicence(m)
		if lic == "" {
			return fmt.Errorf("the binary links %s, whose licence is not recorded (ModuleLicence)", m)
		}
		for _, id := range strings.Split(lic, " AND ") {
			if !ids[id] {
				return fmt.Errorf("the binary links %s (%s), but License-Expression %q does not name %s", m, lic, expr, id)
			}
		}
	}
	return nil
}

// RecordRow is one line of a wheel's RECORD; Size is -1 when empty.
type RecordRow struct {
	Path, Hash string
	Size       int64
}

// ParseRecord reads a RECORD file (CSV: path, hash, size). It refuses
// absolute paths and paths that leave the wheel.
func ParseRecord(data []byte) ([]RecordRow, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = 3
	var rows []RecordRow
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("RECORD: %w", err)
		}
		p := rec[0]
		if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || !fs.ValidPath(p) {
			return nil, fmt.Errorf("RECORD: bad path %q", p)
		}
		row := RecordRow{Path: p, Hash: rec[1], Size: -1}
		if rec[2] != "" {
			n, err := strconv.ParseInt(rec[2], 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("RECORD: bad size %q for %s", rec[2], p)
			}
			row.Size = n
		}
		if row.Hash != "" && !strings.HasPrefix(row.Hash, "sha256=") {
			return nil, fmt.Errorf("RECORD: %s: hash %q is not sha256", p, row.Hash)
		}
		rows = append(rows, row)
	}
}
