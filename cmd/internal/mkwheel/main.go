// Command mkwheel builds the bridge's wheels (make wheels) and its source
// distribution (make sdist): for each GOOS/GOARCH given, the statically
// linked binary (CGO_ENABLED=0, -trimpath), then a wheel holding it
// (package jupyter/wheel). The version is what the host build's version
// command prints, so the wheels, the sdist and the binaries say the same.
//
//	go run ./cmd/internal/mkwheel [-out dist] [GOOS/GOARCH ...]
//	go run ./cmd/internal/mkwheel -sdist [-out dist]
//	go run ./cmd/internal/mkwheel -verify FILE.whl|FILE.tar.gz ...
//	go run ./cmd/internal/mkwheel -recipe recipe/recipe.yaml SDIST > recipe.yaml
//	go run ./cmd/internal/mkwheel -release DIST EXTRA
//
// Without platforms it writes all of wheel.Platforms. The binaries are
// built with -buildvcs=false and the commit stamped with -ldflags -X
// (from git in a checkout, from the sdist's COMMIT file in an sdist), so
// the wheel built from the sdist (whose PEP 517 backend runs this command)
// is the same bytes as the one built from the checkout. The sdist holds
// the module's files the binary and this command need (go list -deps for
// every wheel platform, tracked by git), go.sum, LICENSE and README.md.
// -recipe prints the conda-forge recipe with the sdist's sha256 in place
// of its placeholder.
//
// It runs offline: it needs the Go toolchain, the module cache and (for
// the commit and the sdist's file list in a checkout) git, nothing else.
// It never downloads anything and never runs Python.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter/wheel"
)

const (
	mainPackage    = "./cmd/megane-jupyter-bridge"
	mkwheelPackage = "./cmd/internal/mkwheel"
	// recipePlaceholder is recipe/recipe.yaml's source sha256 until -recipe
	// fills in the sdist's (the release does: make recipe).
	recipePlaceholder = "SDIST_SHA256_FILLED_IN_BY_MAKE_RECIPE"
	// recipeMaintainerPlaceholder stands in recipe/recipe.yaml for the
	// GitHub handles conda-forge needs; make release-rehearsal flags it.
	recipeMaintainerPlaceholder = "MAINTAINER_GITHUB_HANDLE"
)

// sdistExtras are the module's files the sdist holds besides the
// packages' (go list): the build needs go.sum and the backend; LICENSE and
// README.md go with every copy.
var sdistExtras = []string{"go.mod", "go.sum", "LICENSE", "README.md", wheel.BackendPath + "/" + wheel.BackendModule + ".py"}

func main() {
	out := flag.String("out", "dist", "directory to write the wheels or the sdist into")
	sdist := flag.Bool("sdist", false, "write the source distribution instead of wheels")
	verify := flag.Bool("verify", false, "check the wheels and sdists named as arguments instead of building")
	recipe := flag.String("recipe", "", "print this conda-forge recipe with the sha256 of the sdist named as argument filled in")
	release := flag.Bool("release", false, "check the release in DIST (wheels, sdist) and EXTRA (recipe, SHA256SUMS, SBOMs), the two arguments, before it is published")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: mkwheel [-out DIR] [GOOS/GOARCH ...] (default: %s)\n       mkwheel -sdist [-out DIR]\n       mkwheel -verify FILE ...\n       mkwheel -recipe recipe/recipe.yaml SDIST\n       mkwheel -release DIST EXTRA\n", strings.Join(wheel.Platforms, " "))
		flag.PrintDefaults()
	}
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx := context.Background()
	var err error
	switch {
	case *release:
		if flag.NArg() != 2 {
			err = errors.New("-release takes two arguments: DIST (the wheels and the sdist) and EXTRA (recipe.yaml, SHA256SUMS, the SBOMs)")
			break
		}
		var pin string
		if pin, err = pinnedGo(); err == nil {
			err = checkRelease(os.Stdout, flag.Arg(0), flag.Arg(1), pin)
		}
	case *verify:
		err = verifyFiles(os.Stdout, flag.Args())
	case *recipe != "":
		if flag.NArg() != 1 {
			err = errors.New("-recipe takes one argument: the sdist whose sha256 to fill in")
			break
		}
		var rendered []byte
		if rendered, err = renderRecipe(*recipe, flag.Arg(0)); err == nil {
			_, err = os.Stdout.Write(rendered)
		}
	case *sdist:
		if flag.NArg() != 0 {
			err = errors.New("-sdist takes no platforms: the sdist builds for the machine that builds it")
			break
		}
		err = runSdist(ctx, *out, log)
	default:
		platforms := flag.Args()
		if len(platforms) == 0 {
			platforms = wheel.Platforms
		}
		err = run(ctx, *out, platforms, log)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkwheel:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string, platforms []string, log *slog.Logger) error {
	for _, p := range platforms {
		if _, err := wheel.Tags(p, nil); err != nil && strings.HasPrefix(err.Error(), "no wheel platform") {
			return err
		}
	}
	tmp, err := os.MkdirTemp("", "mkwheel-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	host := runtime.GOOS + "/" + runtime.GOARCH
	commit, hostBin, version, err := hostBuild(ctx, tmp)
	if err != nil {
		return err
	}
	licence, err := os.ReadFile("LICENSE")
	if err != nil {
		return fmt.Errorf("the wheels carry the repository's LICENSE: run from the repository's root: %w", err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		return fmt.Errorf("the wheels' long description is README.md: %w", err)
	}
	var failed []string
	for _, p := range platforms {
		linked, err := notices(ctx, []string{p})
		if err != nil {
			log.Error("licences not collected", "platform", p, "error", err)
			failed = append(failed, p)
			continue
		}
		bin := hostBin
		if p != host {
			if bin, err = build(ctx, p, commit, tmp); err != nil {
				log.Error("build failed", "platform", p, "error", err)
				failed = append(failed, p)
				continue
			}
		}
		path, err := wheel.Write(wheel.Options{Version: version, Platform: p, Binary: bin, Dir: out, LicenseText: licence, Notices: linked, Readme: readme, Logger: log})
		if err != nil {
			log.Error("wheel not written", "platform", p, "error", err)
			failed = append(failed, p)
			continue
		}
		fmt.Println(path)
	}
	if len(failed) > 0 {
		return fmt.Errorf("no wheel for %s (see above); build the others with WHEEL_PLATFORMS=…", strings.Join(failed, " "))
	}
	return nil
}

// hostBuild builds the bridge for this machine into tmp, stamped with the
// source's commit, and returns the commit, the binary and the version it
// prints: what the wheels and the sdist are named by.
func hostBuild(ctx context.Context, tmp string) (commit, bin, version string, err error) {
	if commit, err = sourceCommit(ctx); err != nil {
		return "", "", "", err
	}
	if bin, err = build(ctx, runtime.GOOS+"/"+runtime.GOARCH, commit, tmp); err != nil {
		return "", "", "", err
	}
	if version, err = binaryVersion(ctx, bin); err != nil {
		return "", "", "", err
	}
	return commit, bin, version, nil
}

// runSdist writes the source distribution into out and prints its path.
func runSdist(ctx context.Context, out string, log *slog.Logger) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return errors.New("run from the module's root (no go.mod here)")
	}
	tmp, err := os.MkdirTemp("", "mkwheel-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	commit, _, version, err := hostBuild(ctx, tmp)
	if err != nil {
		return err
	}
	names, err := sdistFiles(ctx)
	if err != nil {
		return err
	}
	when, err := wheel.SourceDate(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}
	files := make([]wheel.SourceFile, 0, len(names))
	for _, n := range names {
		data, err := os.ReadFile(filepath.FromSlash(n))
		if err != nil {
			return fmt.Errorf("the sdist needs %s: %w", n, err)
		}
		files = append(files, wheel.SourceFile{Name: n, Data: data})
	}
	linked, err := notices(ctx, wheel.Platforms)
	if err != nil {
		return err
	}
	p, err := wheel.WriteSdist(wheel.SdistOptions{Version: version, Files: files, Notices: linked, Commit: commit, Time: when, Dir: out, Logger: log})
	if err != nil {
		return err
	}
	fmt.Println(p)
	return nil
}

// notices returns the licence files (wheel.IsLicenceFile) of Go's
// standard library (GOROOT's, of the Go that builds) and of every module
// the bridge links when built for any of platforms (go list -deps), read
// from the module cache: what every copy of the binary must carry. A
// module without a licence file is an error.
func notices(ctx context.Context, platforms []string) ([]wheel.Notice, error) {
	goroot, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOROOT: %w", err)
	}
	dirs := map[string]string{wheel.StdModule: strings.TrimSpace(string(goroot))}
	for _, p := range platforms {
		out, err := goListDeps(ctx, p, "-f",
			"{{with .Module}}{{if not .Main}}{{.Path}}\t{{with .Replace}}{{.Dir}}{{else}}{{.Dir}}{{end}}{{end}}{{end}}", mainPackage)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(out), "\n") {
			if mod, dir, ok := strings.Cut(line, "\t"); ok {
				dirs[mod] = dir
			}
		}
	}
	var all []wheel.Notice
	for mod, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("the licence files of %s: %w", mod, err)
		}
		found := 0
		for _, e := range entries {
			if !e.Type().IsRegular() || !wheel.IsLicenceFile(e.Name()) {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			all = append(all, wheel.Notice{Module: mod, File: e.Name(), Data: data})
			found++
		}
		if found == 0 {
			return nil, fmt.Errorf("%s (in %s) has no licence file (LICENSE, COPYING, NOTICE, ...): it may not be shipped", mod, dir)
		}
	}
	return all, nil
}

// goListDeps runs go list -deps with args for platform (GOOS/GOARCH,
// CGO_ENABLED=0, as the wheels are built) and returns its output.
func goListDeps(ctx context.Context, platform string, args ...string) ([]byte, error) {
	goos, goarch, _ := strings.Cut(platform, "/")
	cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-deps"}, args...)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list for %s: %w\n%s", platform, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// sourceCommit is the commit to stamp into the binaries: the sdist's
// CommitFile when there is one, else HEAD of the git checkout whose root
// is here ("+dirty" when git status lists anything, as go build's
// vcs.modified), else "" (not known: nothing is stamped).
func sourceCommit(ctx context.Context) (string, error) {
	if data, err := os.ReadFile(wheel.CommitFile); err == nil {
		c := strings.TrimSpace(string(data))
		if c == "" || strings.ContainsAny(c, " \t\n'\"") {
			return "", fmt.Errorf("%s holds %q, not a commit", wheel.CommitFile, data)
		}
		return c, nil
	}
	top, err := gitOutput(ctx, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", nil // not a checkout (or no git): no commit
	}
	here, _ := filepath.Abs(".")
	if !sameDir(strings.TrimSpace(top), here) {
		return "", nil // inside another checkout (an unpacked sdist under a repository)
	}
	rev, err := gitOutput(ctx, "rev-parse", "HEAD")
	if err != nil {
		return "", fmt.Errorf("git rev-parse HEAD: %w", err)
	}
	status, err := gitOutput(ctx, "status", "--porcelain")
	if err != nil {
		return "", fmt.Errorf("git status: %w", err)
	}
	c := strings.TrimSpace(rev)
	if strings.TrimSpace(status) != "" {
		c += "+dirty"
	}
	return c, nil
}

func sameDir(a, b string) bool {
	ai, err1 := os.Stat(a)
	bi, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(ai, bi)
}

func gitOutput(ctx context.Context, args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// listedPackage is what sdistFiles reads from go list -json.
type listedPackage struct {
	Dir        string
	ImportPath string
	Module     *struct{ Main bool }
	GoFiles    []string
	EmbedFiles []string
	SFiles     []string
	HFiles     []string
	Error      *struct{ Err string }
}

// sdistFiles lists, sorted, the module's files the sdist holds: every
// non-test file go list names (Go, assembly, embedded) of the module's
// packages the binary and mkwheel import, for every wheel platform, and
// sdistExtras. In a git checkout each must be tracked (the sdist is what
// was committed, plus any local changes to those files, which the commit's
// "+dirty" says).
func sdistFiles(ctx context.Context) ([]string, error) {
	root, _ := filepath.Abs(".")
	set := map[string]bool{}
	for _, n := range sdistExtras {
		set[n] = true
	}
	for _, p := range wheel.Platforms {
		out, err := goListDeps(ctx, p, "-json=Dir,ImportPath,Module,GoFiles,EmbedFiles,SFiles,HFiles,Error", mainPackage, mkwheelPackage)
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var pkg listedPackage
			if err := dec.Decode(&pkg); err == io.EOF {
				break
			} else if err != nil {
				return nil, fmt.Errorf("go list for %s: %w", p, err)
			}
			if pkg.Module == nil || !pkg.Module.Main {
				continue
			}
			if pkg.Error != nil {
				return nil, fmt.Errorf("go list for %s: %s: %s", p, pkg.ImportPath, pkg.Error.Err)
			}
			rel, err := filepath.Rel(root, pkg.Dir)
			if err != nil || !filepath.IsLocal(rel) && rel != "." {
				return nil, fmt.Errorf("package %s is in %s, outside %s", pkg.ImportPath, pkg.Dir, root)
			}
			for _, group := range [][]string{pkg.GoFiles, pkg.EmbedFiles, pkg.SFiles, pkg.HFiles} {
				for _, f := range group {
					set[path.Join(filepath.ToSlash(rel), f)] = true
				}
			}
		}
	}
	if tracked, err := trackedFiles(ctx, root); err != nil {
		return nil, err
	} else if tracked != nil {
		for n := range set {
			if !tracked[n] {
				return nil, fmt.Errorf("the sdist needs %s, which git does not track: git add it (or stop needing it)", n)
			}
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		if _, err := os.Stat(filepath.FromSlash(n)); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("the sdist needs %s, which is missing", n)
		}
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// trackedFiles is the set of files git tracks in the checkout whose root is
// root; nil when root is not a checkout's root (an unpacked sdist).
func trackedFiles(ctx context.Context, root string) (map[string]bool, error) {
	top, err := gitOutput(ctx, "rev-parse", "--show-toplevel")
	if err != nil || !sameDir(strings.TrimSpace(top), root) {
		return nil, nil
	}
	out, err := gitOutput(ctx, "ls-files", "-z")
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	set := map[string]bool{}
	for _, n := range strings.Split(out, "\x00") {
		if n != "" {
			set[n] = true
		}
	}
	return set, nil
}

// verifyFiles checks each wheel (wheel.Verify) and sdist
// (wheel.VerifySdist) and prints one line for each.
func verifyFiles(w io.Writer, files []string) error {
	if len(files) == 0 {
		return errors.New("-verify: name the wheels and sdists to check")
	}
	for _, f := range files {
		switch {
		case strings.HasSuffix(f, ".whl"):
			info, err := wheel.Verify(f)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%s: %s %s, %d files, tags %s, RECORD matches; built by %s, links %d modules, each with its licence files (%s)\n",
				filepath.Base(f), info.Name, info.Version, len(info.Files), strings.Join(info.Tags, "."), info.GoVersion, len(info.Linked)-1, info.Metadata["License-Expression"])
		case strings.HasSuffix(f, ".tar.gz"):
			info, err := wheel.VerifySdist(f)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%s: %s %s, %d files, commit %s, backend %s, %d licence files (%s)\n", filepath.Base(f), info.Name, info.Version, len(info.Files), info.Commit, info.Pyproject.BuildSystem.BuildBackend, len(info.LicenseFiles), info.Metadata["License-Expression"])
		default:
			return fmt.Errorf("%s: neither a wheel (.whl) nor an sdist (.tar.gz)", f)
		}
	}
	return nil
}

// renderRecipe returns the recipe template with its one source sha256
// line's placeholder replaced by the sdist's sha256, after checking that
// the sdist is the file the recipe's source url names.
func renderRecipe(template, sdist string) ([]byte, error) {
	tmpl, err := os.ReadFile(template)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(sdist)
	if err != nil {
		return nil, err
	}
	info, err := wheel.VerifySdist(sdist)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	return fillRecipe(tmpl, info.Version, hex.EncodeToString(sum[:]))
}

// fillRecipe puts sum in place of the placeholder of the recipe's one
// "sha256: " line, after checking that the recipe's context version is
// version.
func fillRecipe(tmpl []byte, version, sum string) ([]byte, error) {
	var out bytes.Buffer
	var filled, versioned int
	sc := bufio.NewScanner(bytes.NewReader(tmpl))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(trimmed, "version: "); ok && strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "    ") && versioned == 0 {
			if strings.Trim(v, `"'`) != version {
				return nil, fmt.Errorf("the recipe's context version is %s, the sdist's %s: change the recipe", v, version)
			}
			versioned++
		}
		if v, ok := strings.CutPrefix(trimmed, "sha256: "); ok {
			if strings.Trim(v, `"'`) != recipePlaceholder {
				return nil, fmt.Errorf("the recipe's sha256 is %s, not the placeholder %s", v, recipePlaceholder)
			}
			line = strings.Replace(line, recipePlaceholder, sum, 1)
			filled++
		}
		out.WriteString(line + "\n")
	}
	if filled != 1 || versioned != 1 {
		return nil, fmt.Errorf("the recipe has %d sha256 lines and %d context version lines, not one of each", filled, versioned)
	}
	return out.Bytes(), nil
}

// build builds the bridge for platform into a directory of its own under
// tmp and returns the binary's path. -buildvcs=false and the commit as
// -X main.commit: a build from the sdist (no .git) gives the same bytes.
// With -trimpath go build records no -ldflags in the binary. Stripped.
func build(ctx context.Context, platform, commit, tmp string) (string, error) {
	goos, goarch, _ := strings.Cut(platform, "/")
	name := "megane-jupyter-bridge"
	if goos == "windows" {
		name += ".exe"
	}
	bin := filepath.Join(tmp, goos+"_"+goarch, name)
	// -s -w: no symbol table and no DWARF, which a shipped binary does not
	// need (panics still name functions; go version -m still reads the
	// build information): 22.7 MB → 15.7 MB for linux/amd64.
	ldflags := "-s -w"
	if commit != "" {
		ldflags += " -X main.commit=" + commit
	}
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags=" + ldflags}
	cmd := exec.CommandContext(ctx, "go", append(args, "-o", bin, mainPackage)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = os.Stderr, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build for %s: %w\n%s", platform, err, strings.TrimSpace(stderr.String()))
	}
	return bin, nil
}

// binaryVersion runs bin's version command and returns the version from
// its first line ("megane-jupyter-bridge 0.1.0").
func binaryVersion(ctx context.Context, bin string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return "", fmt.Errorf("%s version: %w", bin, err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != "megane-jupyter-bridge" {
		return "", fmt.Errorf("%s version printed %q, not \"megane-jupyter-bridge VERSION\" first", bin, line)
	}
	return f[1], nil
}
