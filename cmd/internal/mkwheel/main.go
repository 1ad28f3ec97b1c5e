// Command mkwheel builds the bridge's wheels (make wheels): for each
// GOOS/GOARCH given, the statically linked binary (CGO_ENABLED=0,
// -trimpath), then a wheel holding it (package jupyter/wheel). The wheels'
// version is what the host build's version command prints, so the wheels
// and the binaries say the same.
//
//	go run ./cmd/internal/mkwheel [-out dist] [GOOS/GOARCH ...]
//
// Without platforms it writes all of wheel.Platforms. It runs offline: it
// needs the Go toolchain and the module cache, nothing else. It holds no
// logic of its own beyond running go build, and never downloads anything.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter/wheel"
)

const mainPackage = "./cmd/megane-jupyter-bridge"

func main() {
	out := flag.String("out", "dist", "directory to write the wheels into")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: mkwheel [-out DIR] [GOOS/GOARCH ...] (default: %s)\n", strings.Join(wheel.Platforms, " "))
		flag.PrintDefaults()
	}
	flag.Parse()
	platforms := flag.Args()
	if len(platforms) == 0 {
		platforms = wheel.Platforms
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(context.Background(), *out, platforms, log); err != nil {
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
	hostBin, err := build(ctx, host, tmp)
	if err != nil {
		return err
	}
	version, err := binaryVersion(ctx, hostBin)
	if err != nil {
		return err
	}
	licence, err := os.ReadFile("LICENSE")
	if err != nil {
		return fmt.Errorf("the wheels carry the repository's LICENSE: run from the repository's root: %w", err)
	}
	var failed []string
	for _, p := range platforms {
		bin := hostBin
		if p != host {
			if bin, err = build(ctx, p, tmp); err != nil {
				log.Error("build failed", "platform", p, "error", err)
				failed = append(failed, p)
				continue
			}
		}
		path, err := wheel.Write(wheel.Options{Version: version, Platform: p, Binary: bin, Dir: out, LicenseText: licence, Logger: log})
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

// build builds the bridge for platform into a directory of its own under
// tmp and returns the binary's path.
func build(ctx context.Context, platform, tmp string) (string, error) {
	goos, goarch, _ := strings.Cut(platform, "/")
	name := "megane-jupyter-bridge"
	if goos == "windows" {
		name += ".exe"
	}
	bin := filepath.Join(tmp, goos+"_"+goarch, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=auto", "-o", bin, mainPackage)
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
