package main

// Where serve --standalone takes its token from. A command line is public
// (ps, /proc/<pid>/cmdline): --token still works but is warned about;
// --token-file and MEGANE_BRIDGE_TOKEN keep the token out of it, and make run
// keeps its token in a file that survives restarts.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/auth"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// admitted reports whether a page presenting token is admitted by the
// program at addr.
func admitted(t *testing.T, addr, token string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, _, err := bridgetest.Dial(ctx, "ws://"+addr+"/megane/builder-tools/ws?token="+token, nil)
	if err != nil {
		return false
	}
	defer p.Close()
	m, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": 1})
	return err == nil && m.OK != nil && *m.OK
}

// TestServeStandaloneTokenSources: the real program takes its token from
// each source; only --token puts it on the command line, and the program
// says so.
func TestServeStandaloneTokenSources(t *testing.T) {
	const token = "tok-from-test-0123456789"
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "standalone.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const warning = "--token is visible to every local user in the process list"
	cases := []struct {
		name     string
		env      []string
		args     []string
		onCmd    bool // the token is on the command line, with the warning
		logHas   string
		notFound bool
	}{
		{name: "--token-file", args: []string{"--token-file", tokenFile}, logHas: `from=` + tokenFile + ` created=false`},
		{name: auth.TokenEnv, env: []string{auth.TokenEnv + "=" + token}, logHas: "from=" + auth.TokenEnv},
		{name: "--token", args: []string{"--token", token}, onCmd: true, logHas: warning},
		{name: "--token-file wins over " + auth.TokenEnv, env: []string{auth.TokenEnv + "=other-token-0123456789"},
			args: []string{"--token-file", tokenFile}, logHas: `from=` + tokenFile},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--standalone", "--servers", demoServersFile(t, nil)}, tc.args...)
			pp := startProgram(t, tc.env, args...)
			if !admitted(t, pp.addr, token) {
				t.Fatalf("a page with the token was not admitted\n%s", pp.stderr)
			}
			if admitted(t, pp.addr, "wrong-"+token) {
				t.Fatal("a page with another token was admitted")
			}
			if got := strings.Contains(cmdlineOf(pp.cmd.Process.Pid), token); got != tc.onCmd {
				t.Errorf("token on the command line: %v, want %v (%s)", got, tc.onCmd, cmdlineOf(pp.cmd.Process.Pid))
			}
			log := pp.stderr.String()
			if !strings.Contains(log, tc.logHas) || strings.Contains(log, warning) != tc.onCmd {
				t.Errorf("the log does not say %q (or warns wrongly):\n%s", tc.logHas, log)
			}
			if strings.Contains(log, token) {
				t.Errorf("the log carries the token:\n%s", log)
			}
		})
	}
}

// TestServeTokenFileKeptAcrossRestarts: as make run uses it, --token-file
// naming a missing file creates it (mode 0600, its directory 0700) with a
// new token, and the next start admits the same token.
func TestServeTokenFileKeptAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "megane-jupyter-bridge", "standalone.token")
	var first string
	for run := 1; run <= 2; run++ {
		pp := startProgram(t, nil, "--standalone", "--servers", demoServersFile(t, nil), "--token-file", path)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("start %d: %v\n%s", run, err, pp.stderr)
		}
		token := strings.TrimSpace(string(b))
		if run == 1 {
			first = token
			for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
				if st, err := os.Stat(p); err != nil || st.Mode().Perm() != want {
					t.Errorf("%s: %v, want mode %04o", p, st.Mode(), want)
				}
			}
			if !strings.Contains(pp.stderr.String(), "created=true") {
				t.Errorf("start 1 does not say it created the token file:\n%s", pp.stderr)
			}
		} else if token != first {
			t.Errorf("start 2 has token file text %q, want the first start's", token)
		}
		if !admitted(t, pp.addr, first) {
			t.Fatalf("start %d does not admit the token created by start 1\n%s", run, pp.stderr)
		}
		pp.cmd.Process.Signal(os.Interrupt)
		if code := pp.waitExit(t, 10*time.Second); code != 0 {
			t.Fatalf("start %d: exit status %d\n%s", run, code, pp.stderr)
		}
	}
}

// TestServeTokenRefusals: a token file others could read, and token flags
// that do not fit, stop serve before it starts, with the reason.
func TestServeTokenRefusals(t *testing.T) {
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared.token")
	if err := os.WriteFile(shared, []byte("tok-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string // the whole of stderr
	}{
		{"a token file others may read", []string{"serve", "--standalone", "--token-file", shared}, 1,
			"megane-jupyter-bridge: --token-file: token file " + shared + " has mode 0644: its group or others may read or change it, and the token lets anyone run the configured tools (chmod 600 it)\n"},
		{"--token and --token-file", []string{"serve", "--standalone", "--token", "tok-0123456789abcdef", "--token-file", shared}, 2,
			"megane-jupyter-bridge: give the token once: --token or --token-file\n"},
		{"a guessable --token", []string{"serve", "--standalone", "--token", "abc"}, 1,
			"megane-jupyter-bridge: a standalone token of 3 characters can be guessed: give one of at least 16 (or none: the bridge makes 64 hex digits)\n"},
		{"--token-file with Jupyter", []string{"serve", "--jupyter-url", "http://127.0.0.1:1/", "--token-file", shared}, 2,
			"megane-jupyter-bridge: --token-file is for --standalone: with Jupyter, pages connect with Jupyter's own credentials\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stderr, code := runProgram(t, nil, tc.args...)
			if code != tc.code || !strings.HasSuffix(stderr, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and, at the end:\n%s", code, stderr, tc.code, tc.want)
			}
		})
	}
}

// TestMakeRunTokenFile: the Makefile's TOKEN_FILE, a shell expression, names
// the file beside the receipt key (jupyter.ReceiptKeyPath), however
// Jupyter's data directory is found.
func TestMakeRunTokenFile(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var expr string
	for _, line := range strings.Split(string(mk), "\n") {
		if v, ok := strings.CutPrefix(line, "TOKEN_FILE ?= "); ok {
			expr = strings.ReplaceAll(v, "$$", "$")
		}
	}
	if expr == "" {
		t.Fatal("the Makefile sets no TOKEN_FILE")
	}
	if !strings.Contains(string(mk), `--token-file "$(TOKEN_FILE)"`) {
		t.Fatal("make run does not pass --token-file \"$(TOKEN_FILE)\"")
	}
	cases := []struct {
		name string
		env  map[string]string
	}{
		{"JUPYTER_DATA_DIR", map[string]string{"HOME": "/home/alice", "XDG_DATA_HOME": "/xdg", "JUPYTER_DATA_DIR": "/jdata"}},
		{"XDG_DATA_HOME", map[string]string{"HOME": "/home/alice", "XDG_DATA_HOME": "/xdg"}},
		{"HOME", map[string]string{"HOME": "/home/alice"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("/bin/sh", "-c", `printf %s "`+expr+`"`)
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			for k, v := range tc.env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			key, err := jupyter.ReceiptKeyPath(func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(filepath.Dir(key), "standalone.token"); string(out) != want {
				t.Errorf("TOKEN_FILE is %s, want %s (beside the receipt key)", out, want)
			}
		})
	}
}
