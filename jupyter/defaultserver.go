package jupyter

import (
	"fmt"
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

// defaultEntry is the reference server in one of three states: the
// megane-builder-tools command (PATH, then ~/.local/bin), else uvx (PATH,
// then ~/.local/bin, ~/.cargo/bin) running DefaultServerSource, else the
// uvx command line with a warning saying what to install.
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
	if p, ok := find(DefaultServerName, ".local/bin"); ok {
		ent.Command = p
	} else {
		ent.Args = []string{"--from", DefaultServerSource, DefaultServerName}
		if p, ok := find("uvx", ".local/bin", ".cargo/bin"); ok {
			ent.Command = p
			ent.Warnings = append(ent.Warnings, fmt.Sprintf("%s runs through uvx: its first start downloads and builds it, which can take minutes; `uv tool install %s` makes it start at once", DefaultServerName, DefaultServerSource))
		} else {
			ent.Command = "uvx"
			ent.Warnings = append(ent.Warnings, fmt.Sprintf("%s cannot start: neither %s nor uvx was found on PATH or in ~/.local/bin; install uv (https://docs.astral.sh/uv/getting-started/installation/), or the server itself with `uv tool install %s`; or offer it to nobody: {\"%s\": null} in MeganeBuilderTools.mcp_servers (default_server = false in megane_jupyter_bridge.toml)", DefaultServerName, DefaultServerName, DefaultServerSource, DefaultServerName))
		}
	}
	ent.Fingerprint = Fingerprint(ent)
	return ent
}
