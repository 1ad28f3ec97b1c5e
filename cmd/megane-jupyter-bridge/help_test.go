package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestHelp: every command answers --help (and -h) on stdout with exit
// status 0: its usage line, what it does, and its flags, never the flag
// package's "help requested".
func TestHelp(t *testing.T) {
	cases := []struct {
		cmd  []string
		want []string
	}{
		{[]string{"serve"}, []string{"usage: megane-jupyter-bridge serve", "Serve the Builder Tools WebSocket",
			"Standalone (no Jupyter: make run):\n  --standalone", "With Jupyter (what jupyter-server-proxy starts):\n  --jupyter-url", "Admin:\n  --servers", "  --token-file string\n"}},
		{[]string{"servers"}, []string{"usage: megane-jupyter-bridge servers", "Print the tool servers", "--standalone"}},
		{[]string{"doctor"}, []string{"usage: megane-jupyter-bridge doctor", "Check a deployment", "--spawn"}},
		{[]string{"check"}, []string{"usage: megane-jupyter-bridge check", "Builder Tool Contract", "--json"}},
		{[]string{"install"}, []string{"usage: megane-jupyter-bridge install", "Register the bridge", "--sys-prefix"}},
		{[]string{"uninstall"}, []string{"usage: megane-jupyter-bridge uninstall", "Remove the registration"}},
		{[]string{"approvals"}, []string{"usage: megane-jupyter-bridge approvals reset", "Revoke every confirmation receipt", "--key"}},
		{[]string{"approvals", "reset"}, []string{"usage: megane-jupyter-bridge approvals reset", "--key"}},
		{[]string{"demo-tools"}, []string{"usage: megane-jupyter-bridge demo-tools", "demo Builder tool server", "not run by\nhand"}},
		{[]string{"version"}, []string{"usage: megane-jupyter-bridge version", "Print the bridge's version"}},
	}
	for _, c := range cases {
		for _, flag := range []string{"--help", "-h"} {
			args := append(append([]string{}, c.cmd...), flag)
			stdout, stderr, err := runCLI(t, args...)
			if err != nil || stderr != "" {
				t.Errorf("%q: error %v, stderr %q; want exit 0 and the help on stdout", args, err, stderr)
			}
			if strings.Contains(stdout+stderr, "help requested") || strings.Contains(stdout, "Usage of") {
				t.Errorf("%q prints the flag package's usage:\n%s", args, stdout)
			}
			for _, w := range c.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("%q: help lacks %q:\n%s", args, w, stdout)
				}
			}
		}
	}
	// A flag mistake is still exit status 2, with the usage line on stderr.
	_, stderr, err := runCLI(t, "serve", "--no-such-flag")
	if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), "no-such-flag") || !strings.Contains(stderr, "serve --help") {
		t.Errorf("serve --no-such-flag: %v, stderr %q", err, stderr)
	}
}

// TestStandaloneServersDoctor: with --standalone, servers and doctor
// describe the servers file make run uses and report no Jupyter problem.
func TestStandaloneServersDoctor(t *testing.T) {
	file, err := filepath.Abs(filepath.Join("..", "..", "etc", "demo-servers.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"servers", "doctor"} {
		stdout, _, _ := runCLI(t, cmd, "--standalone", "--servers", file)
		if !strings.Contains(stdout, "standalone (as make run): servers from "+file) || !strings.Contains(stdout, "demo-tools") {
			t.Errorf("%s --standalone does not say what it describes:\n%s", cmd, stdout)
		}
		for _, jupyterOnly := range []string{"jupyter-server-proxy", "registered", "Jupyter's Python", "Jupyter server found"} {
			if strings.Contains(stdout, jupyterOnly) {
				t.Errorf("%s --standalone reports %q, which does not apply without Jupyter:\n%s", cmd, jupyterOnly, stdout)
			}
		}
	}
}
