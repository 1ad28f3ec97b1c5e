package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// errHelpShown is what parseFlags returns after printing a command's help
// for -h or --help: run turns it into exit status 0.
var errHelpShown = errors.New("help shown")

// commandHelp is a command's --help: its usage line, what it does, and its
// flags in groups (a flag no group names is listed under "Flags").
type commandHelp struct {
	usage  string // after "usage: megane-jupyter-bridge "
	about  string // a sentence or two; lines are kept as written
	groups []flagGroup
}

type flagGroup struct {
	title string
	flags []string
}

// parseFlags parses args with fs. For -h or --help it prints h to stdout
// and returns errHelpShown; for a flag mistake it prints the usage line to
// stderr and returns a usageError naming the mistake.
func parseFlags(fs *flag.FlagSet, args []string, h commandHelp, stdout, stderr io.Writer) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(flagsFirst(fs, args))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		writeHelp(stdout, fs, h)
		return errHelpShown
	default:
		fmt.Fprintf(stderr, "usage: megane-jupyter-bridge %s\n(megane-jupyter-bridge %s --help lists the flags)\n", h.usage, fs.Name())
		return usageError{err.Error()}
	}
}

// flagsFirst moves the flags of args (with their values) before the other
// arguments, so that flags may stand anywhere on the line (check NAME
// --servers FILE) as they may before; everything from a "--" on stays as
// it is, at the end (check -- COMMAND --its-own-flag).
func flagsFirst(fs *flag.FlagSet, args []string) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if len(rest) == 0 {
				return append(flags, args[i:]...)
			}
			return append(append(flags, rest...), args[i:]...)
		}
		if len(a) < 2 || a[0] != '-' {
			rest = append(rest, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // Parse says so
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	return append(flags, rest...)
}

// writeHelp prints h with the flags of fs: each as --name TYPE, then what it
// does on the next line, with its default when it has one.
func writeHelp(w io.Writer, fs *flag.FlagSet, h commandHelp) {
	fmt.Fprintf(w, "usage: megane-jupyter-bridge %s\n\n%s\n", h.usage, strings.TrimSpace(h.about))
	listed := map[string]bool{}
	groups := h.groups
	var rest []string
	fs.VisitAll(func(f *flag.Flag) {
		for _, g := range groups {
			for _, n := range g.flags {
				if n == f.Name {
					return
				}
			}
		}
		rest = append(rest, f.Name)
	})
	if len(rest) > 0 {
		title := "Flags"
		if len(groups) > 0 {
			title = "Other flags"
		}
		groups = append(groups, flagGroup{title, rest})
	}
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, n := range g.flags {
			f := fs.Lookup(n)
			if f == nil || listed[n] {
				continue
			}
			listed[n] = true
			typ, text := flag.UnquoteUsage(f)
			line := "  --" + n
			if typ != "" {
				line += " " + typ
			}
			if d := f.DefValue; d != "" && d != "0" && d != "false" && d != "[]" {
				text += " (default " + d + ")"
			}
			fmt.Fprintln(w, line)
			for _, l := range wrap(text, 72) {
				fmt.Fprintln(w, "        "+l)
			}
		}
	}
}

// wrap breaks text into lines of at most width characters, between words.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// The help of every command but serve (serveHelp is beside its flags).
var (
	demoToolsHelp = commandHelp{
		usage: "demo-tools",
		about: `Run the demo Builder tool server: a real MCP server on stdin/stdout with two
Builder tools, gas_box (a random gas in a box) and crystal (a crystal from its
lattice), so that the bridge can be tried without Python. It is not run by
hand: a bridge starts it as a stdio server (etc/demo-servers.json, which make
run uses). Logs go to stderr.`,
	}
	serversHelp = commandHelp{
		usage: "servers [--standalone] [--servers FILE] [--json]",
		about: `Print the tool servers the bridge would offer, with their fingerprints and the
problems found in the configuration: from Jupyter's configuration, as serve
reads it under jupyter-server-proxy, or with --standalone from the servers
file make run uses (etc/demo-servers.json, with this binary as
megane-jupyter-bridge, as make run puts bin/ on PATH).`,
		groups: []flagGroup{
			{"Standalone (no Jupyter: make run)", []string{"standalone", "servers"}},
			{"With Jupyter", []string{"python", "root-dir"}},
		},
	}
	doctorHelp = commandHelp{
		usage: "doctor [--standalone] [--spawn] [flags]",
		about: `Check a deployment and print one line per finding (ok, warning, error): Jupyter's
Python and jupyter-server-proxy, the registration, the running Jupyter
servers and every configured tool server; with --spawn, start each server and
check its tools as check does. With --standalone, check what make run uses
instead (its servers file; no Jupyter, so no Jupyter checks). Exit status 1
when there is an error: something that keeps the bridge from serving pages.
A tool server that cannot start is a warning (the bridge serves the others);
--strict makes warnings fail too.`,
		groups: []flagGroup{
			{"Standalone (no Jupyter: make run)", []string{"standalone", "servers"}},
			{"With Jupyter", []string{"jupyter-url", "python", "root-dir"}},
			{"Starting the servers", []string{"spawn", "timeout"}},
			{"Exit status", []string{"strict"}},
		},
	}
	checkHelp = commandHelp{
		usage: "check [--json] [NAME... | -- COMMAND [ARG...] | URL]",
		about: `Check tool servers against the Builder Tool Contract: start each configured server
(or only those named, or one command after --, or a Streamable HTTP URL) as
the bridge would, check its tool definitions and call each Builder tool with
sample arguments. One line per finding; exit status 1 when any fails.`,
	}
	installHelp = commandHelp{
		usage: "install [--user | --sys-prefix | --system] [flags]",
		about: `Register the bridge with jupyter-server-proxy in a Jupyter configuration file, so
that the Jupyter server starts it (restart the server afterwards).`,
		groups: []flagGroup{{"Where (one of)", []string{"user", "sys-prefix", "system", "python"}}},
	}
	uninstallHelp = commandHelp{
		usage:  "uninstall [--user | --sys-prefix | --system] [--python PATH]",
		about:  `Remove the registration install wrote.`,
		groups: []flagGroup{{"Where (one of)", []string{"user", "sys-prefix", "system", "python"}}},
	}
	approvalsHelp = commandHelp{
		usage: "approvals reset [--key PATH]",
		about: `Revoke every confirmation receipt by rotating the signing key: every page must
confirm each server again before its next connection. A running bridge notices
the new key on its next check.`,
	}
)
