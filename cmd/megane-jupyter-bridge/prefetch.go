package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/megane-labs/megane-jupyter-bridge/child"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

var prefetchHelp = commandHelp{
	usage: "prefetch-default [--into DIR] [--from SOURCE] [--python PYTHON] [-- INSTALLER-ARGS...]",
	about: `Install the default reference server (megane-builder-tools, at the commit the
bridge pins) into an environment of its own, so that it starts with no network:
in an image, run it once where the bridge is installed (its place is then
{prefix}/share/megane-jupyter-bridge/megane-builder-tools, which the default
entry finds for every user); else it goes to Jupyter's data directory. It uses
uv when uv is on PATH, else python -m venv and pip. --from installs a wheel or
an sdist file (or any pip requirement) instead of the pinned Git commit; what
follows -- goes to the installer (--no-index, --find-links DIR, ...).`,
	groups: []flagGroup{{"Where and what", []string{"into", "from", "python"}}},
}

// runPrefetch is the prefetch-default command.
func runPrefetch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prefetch-default", flag.ContinueOnError)
	into := fs.String("into", "", "the environment's directory (default: the first of the places the default entry looks, see above)")
	from := fs.String("from", jupyter.DefaultServerSource, "what to install: the pinned Git commit, or a wheel or sdist file")
	python := fs.String("python", "", "the Python to make the environment with (default: the Python the bridge is installed in, else python3 on PATH)")
	if err := parseFlags(fs, args, prefetchHelp, stdout, stderr); err != nil {
		return err
	}
	extra := fs.Args()
	opts := jupyter.Options{}
	opts.Self, _ = thisBinary()
	dir := *into
	if dir == "" {
		dir = jupyter.PrefetchDirs(opts)[0]
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	source := *from
	if _, err := os.Stat(source); err == nil {
		if source, err = filepath.Abs(source); err != nil {
			return err
		}
	}
	py := *python
	if py == "" {
		if p, err := jupyter.FindPython(ctx, opts); err == nil && strings.HasPrefix(p.Source, "the Python environment the bridge") {
			py = p.Path
		} else if p, err := child.LookPath("python3", os.Getenv("PATH"), ""); err == nil {
			py = p
		} else if p, err := child.LookPath("python", os.Getenv("PATH"), ""); err == nil {
			py = p
		} else {
			return errors.New("prefetch-default needs Python 3 (python3 on PATH, or --python): the reference server is a Python package")
		}
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	var steps [][]string
	uv, uvErr := child.LookPath("uv", os.Getenv("PATH"), "")
	if uvErr == nil {
		steps = [][]string{
			{uv, "venv", "--quiet", "--python", py, dir},
			append([]string{uv, "pip", "install", "--quiet", "--python", jupyter.EnvPython(dir), source}, extra...),
		}
	} else {
		steps = [][]string{
			{py, "-m", "venv", dir},
			append([]string{jupyter.EnvPython(dir), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", source}, extra...),
		}
	}
	for _, argv := range steps {
		fmt.Fprintf(stdout, "prefetch-default: %s\n", strings.Join(argv, " "))
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = stderr, stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("prefetch-default: %s failed (%v; its output is above)", filepath.Base(argv[0])+" "+argv[1], err)
		}
	}
	script := jupyter.PrefetchedCommand(dir)
	if _, err := os.Stat(script); err != nil {
		return fmt.Errorf("prefetch-default: %s installed no %s command (%s is missing): is it the megane-builder-tools package?", source, jupyter.DefaultServerName, script)
	}
	found := false
	for _, d := range jupyter.PrefetchDirs(opts) {
		found = found || d == dir
	}
	fmt.Fprintf(stdout, "prefetch-default: %s is installed in %s; it starts with no network\n", jupyter.DefaultServerName, dir)
	if !found {
		fmt.Fprintf(stdout, "prefetch-default: the default entry does not look in %s: configure it, {\"%s\": {\"command\": %q}} in MeganeBuilderTools.mcp_servers\n", dir, jupyter.DefaultServerName, script)
	}
	return nil
}
