package jupyter

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
)

// DefaultServerName is the name of the reference server offered without
// configuration. An entry with this name replaces it; null hides it.
const DefaultServerName = "megane-builder-tools"

// DefaultServerSource is where uvx gets the reference server when the
// megane-builder-tools command is not installed: its Git repository at a
// pinned commit. Every other mention (README.md, etc/) must equal it; a
// test checks.
const DefaultServerSource = "git+https://github.com/hodakamori/megane-builder-tools@3b3eed28fe044b44011e7beac901b3eab264538d"

// prefetchSubdir is the directory, under a share/megane-jupyter-bridge or
// Jupyter's data directory's megane-jupyter-bridge, that holds the
// environment prefetch-default makes for the reference server.
const prefetchSubdir = "megane-builder-tools"

// PrefetchDirs are where prefetch-default puts the reference server's
// environment, in the order the default entry looks for it: beside the
// Python environment a wheel installed this bridge into
// ({prefix}/share/megane-jupyter-bridge/megane-builder-tools: an image's,
// shared by every user of it), then the user's Jupyter data directory
// (…/jupyter/megane-jupyter-bridge/megane-builder-tools). The first is
// missing when the bridge is not in a Python environment.
func PrefetchDirs(opts Options) []string {
	return prefetchDirs(opts.resolve())
}

func prefetchDirs(e env) []string {
	var dirs []string
	if e.self != "" {
		if prefix := installedPrefix(e.self); prefix != "" {
			dirs = append(dirs, filepath.Join(prefix, "share", "megane-jupyter-bridge", prefetchSubdir))
		}
	}
	data := dataDir(func(k string) string { return e.vars[k] }, e.realHome())
	return append(dirs, filepath.Join(data, "megane-jupyter-bridge", prefetchSubdir))
}

// EnvPython is the interpreter of the Python environment at prefix (a
// venv's bin/python3, Scripts\python.exe on Windows): the first that
// exists, else where a new venv will have it.
func EnvPython(prefix string) string {
	cands := envInterpreters(prefix)
	for _, p := range cands {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return cands[0]
}

// PrefetchedCommand is the reference server's console script in the
// environment at dir, as prefetch-default installs it.
func PrefetchedCommand(dir string) string { return envScript(dir, DefaultServerName) }

// defaultEntry is the reference server in one of four states: the
// megane-builder-tools command (PATH, then ~/.local/bin), else the one
// prefetch-default installed (PrefetchDirs: it starts with no network),
// else uvx (PATH, then ~/.local/bin, ~/.cargo/bin) running
// DefaultServerSource, else the uvx command line with a warning saying
// what to install.
func defaultEntry(e env) bridge.ServerSpec {
	ent := bridge.ServerSpec{Name: DefaultServerName, Transport: bridge.TransportStdio, Source: LevelDefault, Level: LevelDefault}
	find := func(name string, extra ...string) (string, bool) {
		if p, ok := e.lookPath(name); ok {
			return p, true
		}
		if e.home == "" {
			return "", false
		}
		for _, d := range extra {
			if p, ok := executableAt(filepath.Join(e.home, d, name)); ok {
				return p, true
			}
		}
		return "", false
	}
	prefetched := ""
	for _, d := range prefetchDirs(e) {
		if p, ok := executableAt(PrefetchedCommand(d)); ok {
			prefetched = p
			break
		}
	}
	if p, ok := find(DefaultServerName, ".local/bin"); ok {
		ent.Command = p
	} else if prefetched != "" {
		ent.Command = prefetched
	} else {
		ent.Args = []string{"--from", DefaultServerSource, DefaultServerName}
		if p, ok := find("uvx", ".local/bin", ".cargo/bin"); ok {
			ent.Command = p
			ent.Warnings = append(ent.Warnings, fmt.Sprintf("%s runs through uvx: its first start needs the network, downloads and builds it, which can take minutes; `megane-jupyter-bridge prefetch-default` (in an image: where the bridge is installed) or `uv tool install %s` makes it start at once, offline", DefaultServerName, DefaultServerSource))
		} else {
			ent.Command = "uvx"
			ent.Warnings = append(ent.Warnings, fmt.Sprintf("%s cannot start: neither %s nor uvx was found on PATH or in ~/.local/bin; install uv (https://docs.astral.sh/uv/getting-started/installation/), or the server itself with `megane-jupyter-bridge prefetch-default` (pip is enough) or `uv tool install %s`; or offer it to nobody: {\"%s\": null} in MeganeBuilderTools.mcp_servers (default_server = false in megane_jupyter_bridge.toml)", DefaultServerName, DefaultServerName, DefaultServerSource, DefaultServerName))
		}
	}
	ent.Fingerprint = Fingerprint(ent)
	return ent
}
