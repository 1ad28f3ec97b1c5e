package main

// End to end with a real jupyter_server 1.23 (Debian 12's
// python3-jupyter-server): the real program in Jupyter mode asks it for
// every verdict, takes its Origin settings from its configuration, and finds
// it from its runtime file when Jupyter itself starts the program (as
// jupyter-server-proxy does).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
)

// startE2EJupyter starts /usr/bin/python3 -m jupyter_server
// (jupytertest.Start) with files written relative to its directory first
// (config/… is its JUPYTER_CONFIG_DIR, pylib/ is on its PYTHONPATH) and
// extraEnv added to its environment.
func startE2EJupyter(t *testing.T, files map[string]string, extraEnv []string) *jupytertest.Server {
	t.Helper()
	return jupytertest.Start(t, jupytertest.Spec{Files: files, Env: extraEnv})
}

// isolateJupyterEnv points the program run in this process at j's
// directories, so it reads j's configuration (and nothing of the machine's).
func isolateJupyterEnv(t *testing.T, j *jupytertest.Server) {
	for _, kv := range j.Env() {
		k, v, _ := strings.Cut(kv, "=")
		if k != "PATH" {
			t.Setenv(k, v)
		}
	}
	t.Setenv("JUPYTER_CONFIG_PATH", "")
}

// e2eVerdict is one connection attempt and what the page must see.
type e2eVerdict struct {
	name   string
	query  string
	header http.Header
	status int    // an HTTP refusal of the upgrade
	code   int    // a refusal after the upgrade (tools:closing and the close frame)
	reason string // substring of the refusal's reason
	user   string // admitted as this user
}

// checkVerdict dials the bridge at addr like a page (Host is the Jupyter
// server's, as jupyter-server-proxy forwards it) and asserts the verdict.
func checkVerdict(t *testing.T, addr, jupyterHost string, tc e2eVerdict) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := tc.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Host", jupyterHost)
	p, resp, err := bridgetest.Dial(ctx, "ws://"+addr+"/megane/builder-tools/ws"+tc.query, h)
	if tc.status != 0 {
		if err == nil {
			p.Close()
			t.Fatalf("want HTTP %d, the upgrade was accepted", tc.status)
		}
		if resp == nil || resp.StatusCode != tc.status {
			t.Fatalf("want HTTP %d, got %v", tc.status, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer p.Close()
	m, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": 1})
	if tc.user != "" {
		if err != nil || m.OK == nil || !*m.OK || m.Str("user") != tc.user {
			t.Fatalf("want admitted as %q: %v %v", tc.user, err, m)
		}
		return
	}
	if err == nil {
		t.Fatalf("want refused with %d, got %s", tc.code, m)
	}
	var closing *bridgetest.Msg
	for _, m := range p.All() {
		if m.Type == "tools:closing" {
			closing = m
		}
	}
	if closing == nil || string(closing.Fields["code"]) != strconv.Itoa(tc.code) || !strings.Contains(closing.Str("reason"), tc.reason) {
		t.Fatalf("want tools:closing %d ~%q, got %v (%v)", tc.code, tc.reason, closing, p.Err())
	}
	if ce := p.CloseError(); ce == nil || ce.Code != tc.code {
		t.Fatalf("want close code %d, got %v", tc.code, p.Err())
	}
}

// connectAndCallCrystal connects to demo-tools (confirming it) and calls
// crystal; it returns the receipt the bridge issued.
func connectAndCallCrystal(t *testing.T, p *bridgetest.Page) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, c := connectServer(t, ctx, p, "demo-tools")
	if !strings.Contains(string(c.Fields["tools"]), `"crystal"`) {
		t.Fatalf("demo-tools does not list crystal: %s", c)
	}
	call, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 12, "server": "demo-tools", "tool": "crystal",
		"arguments": map[string]any{"element": 29, "a": 3.6, "lattice": "fcc", "repeats": []int{2, 2, 2}}})
	if err != nil || call.OK == nil || !*call.OK {
		t.Fatalf("crystal: %v %v", err, call)
	}
	var res struct {
		StructuredContent struct {
			Structure struct{ Elements []int }
		} `json:"structuredContent"`
	}
	json.Unmarshal(call.Fields["result"], &res)
	if n := len(res.StructuredContent.Structure.Elements); n != 4*8 {
		t.Fatalf("crystal returned %d atoms, want 32: %.300s", n, call.Fields["result"])
	}
	return c.Str("approval")
}

func TestJupyterEndToEnd(t *testing.T) {
	// Jupyter allows one extra Origin; the bridge must learn it from the
	// same configuration file.
	j := startE2EJupyter(t, map[string]string{
		"config/jupyter_server_config.json": `{"ServerApp": {"allow_origin": "http://app.example"}}`,
	}, nil)
	cookie := j.LoginCookie(t)
	isolateJupyterEnv(t, j)
	keyFile := filepath.Join(t.TempDir(), "receipt.key")
	r := startServe(t, "--jupyter-url", j.URL, "--servers", demoServersFile(t, nil),
		"--python", "/usr/bin/python3", "--receipt-key", keyFile)
	owner := osUser(t)

	t.Run("token admitted, connects to demo-tools and calls crystal", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p, _, err := bridgetest.Dial(ctx, "ws://"+r.addr+"/megane/builder-tools/ws",
			http.Header{"Authorization": {"token " + j.Token}, "Host": {j.HostHdr}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if approval := connectAndCallCrystal(t, p); approval == "" {
			t.Fatalf("a confirmed connect must return a receipt")
		}
		if st, err := os.Stat(keyFile); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("--receipt-key %s: %v %v", keyFile, err, st)
		}
	})
	same := "http://" + j.HostHdr
	for _, tc := range []e2eVerdict{
		{name: "token in the query", query: "?token=" + j.Token, header: http.Header{"Origin": {same}}, user: owner},
		{name: "login cookie, Jupyter's own page", header: http.Header{"Cookie": {cookie}, "Origin": {same}}, user: owner},
		{name: "login cookie from the Origin Jupyter's configuration allows", header: http.Header{"Cookie": {cookie}, "Origin": {"http://app.example"}}, user: owner},
		{name: "login cookie from another Origin", header: http.Header{"Cookie": {cookie}, "Origin": {"http://evil.example"}}, status: http.StatusForbidden},
		{name: "wrong token", header: http.Header{"Authorization": {"token wrong-" + j.Token[:8]}}, code: bridge.CloseNoCredentials, reason: "did not accept"},
		{name: "no credentials", code: bridge.CloseNoCredentials, reason: "no Jupyter credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkVerdict(t, r.addr, j.HostHdr, tc) })
	}

	t.Run("--allow-origin replaces Jupyter's setting", func(t *testing.T) {
		r2 := startServe(t, "--jupyter-url", j.URL, "--servers", demoServersFile(t, nil),
			"--python", "/usr/bin/python3", "--receipt-key", keyFile, "--allow-origin", "http://other.example")
		checkVerdict(t, r2.addr, j.HostHdr, e2eVerdict{header: http.Header{"Cookie": {cookie}, "Origin": {"http://app.example"}}, status: http.StatusForbidden})
		if err := r2.stop(); err != nil {
			t.Fatal(err)
		}
		noCreds(t, r2.stderr.String(), j.Token, cookie)
	})

	if err := r.stop(); err != nil {
		t.Fatalf("serve: %v\n%s", err, r.stderr)
	}
	if !strings.Contains(r.stderr.String(), "allow_origin=http://app.example") {
		t.Errorf("the log does not show the Origin setting taken from Jupyter:\n%s", r.stderr)
	}
	noCreds(t, r.stderr.String(), j.Token, cookie)
}

// noCreds fails if the token or a cookie value appears in logs.
func noCreds(t *testing.T, logs, token, cookie string) {
	t.Helper()
	secrets := []string{token}
	for _, part := range strings.Split(cookie, ";") {
		if _, v, ok := strings.Cut(strings.TrimSpace(part), "="); ok && len(v) >= 8 {
			secrets = append(secrets, v)
		}
	}
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("a credential (%d bytes) appears in the bridge's log", len(s))
		}
	}
}

// osUser is the name Jupyter 1.x's owner gets: the OS account.
func osUser(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("id", "-un").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// spawnExtension is a jupyter_server extension that starts the program the
// way jupyter-server-proxy does: from the server's own process, once the
// server runs (so jpserver-<pid>.json exists), with the server's
// environment. MEGANE_E2E_ARGV is the command line as JSON;
// MEGANE_E2E_PATH, when set, is the program's PATH.
const spawnExtension = `
import json, os, subprocess
from tornado.ioloop import IOLoop

def _jupyter_server_extension_points():
    return [{"module": "megane_e2e_spawn"}]

def _load_jupyter_server_extension(serverapp):
    def spawn():
        log = open(os.environ["MEGANE_E2E_LOG"], "ab")
        env = dict(os.environ)
        if "MEGANE_E2E_PATH" in env:
            env["PATH"] = env.pop("MEGANE_E2E_PATH")
        subprocess.Popen(json.loads(os.environ["MEGANE_E2E_ARGV"]), stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
    IOLoop.current().add_callback(spawn)
`

// TestJupyterRuntimeFileDiscovery: started by the Jupyter server itself and
// given no --jupyter-url, the program finds its parent from
// jpserver-<ppid>.json and asks it for verdicts.
func TestJupyterRuntimeFileDiscovery(t *testing.T) {
	needPython3Jupyter(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	logFile := filepath.Join(dir, "bridge.log")
	argv, _ := json.Marshal([]string{exe, "serve", "--port", "0", "--ready-file", ready,
		"--servers", demoServersFile(t, nil), "--python", "/usr/bin/python3", "--receipt-key", filepath.Join(dir, "receipt.key")})
	// The program inherits the server's environment, so the test binary
	// acts as the program and finds the runtime directory from it.
	j := startE2EJupyter(t, map[string]string{
		"pylib/megane_e2e_spawn.py":       spawnExtension,
		"config/jupyter_server_config.py": "c.ServerApp.jpserver_extensions = {'megane_e2e_spawn': True}\n",
	}, []string{asProgramEnv + "=1", "MEGANE_E2E_ARGV=" + string(argv), "MEGANE_E2E_LOG=" + logFile, "GORACE=atexit_sleep_ms=0"})
	addr := waitSpawned(t, ready, logFile)
	owner := osUser(t)
	for _, tc := range []e2eVerdict{
		{name: "token", header: http.Header{"Authorization": {"token " + j.Token}}, user: owner},
		{name: "wrong token", header: http.Header{"Authorization": {"token nope-" + j.Token[:8]}}, code: bridge.CloseNoCredentials, reason: "did not accept"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkVerdict(t, addr, j.HostHdr, tc) })
	}
	log, _ := os.ReadFile(logFile)
	if !strings.Contains(string(log), fmt.Sprintf("found_by=\"runtime file %s\"", filepath.Join(j.Path("runtime"), fmt.Sprintf("jpserver-%d.json", j.Cmd.Process.Pid)))) {
		t.Errorf("the log does not say the parent was found from jpserver-%d.json:\n%s", j.Cmd.Process.Pid, log)
	}
	noCreds(t, string(log), j.Token, "")
}

// waitSpawned waits (up to 60 s) for the program a Jupyter server started to
// write its ready file, and returns the address in it. The program's log
// is shown if the test fails.
func waitSpawned(t *testing.T, ready, logFile string) string {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(logFile)
			t.Logf("bridge log:\n%s", log)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the program started by Jupyter did not get ready within 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestJupyterParentPython: Jupyter runs from a venv that is not on the
// program's PATH (a systemd unit or an image that runs
// /opt/venv/bin/jupyter-server directly). Started by that server with no
// --python, the program must read Jupyter's configuration with the
// server's own Python: the venv's sys.prefix, so {venv}/etc/jupyter, and a
// .py file there evaluated with it. doctor, run from a shell whose PATH
// has another Python, says so.
func TestJupyterParentPython(t *testing.T) {
	needPython3Jupyter(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	venv := filepath.Join(dir, "venv")
	if out, err := exec.Command(jupytertest.Python, "-m", "venv", "--without-pip", "--system-site-packages", venv).CombinedOutput(); err != nil {
		jupytertest.Need(t, "python3 -m venv", fmt.Errorf("%v: %s", err, out))
	}
	venvPython := filepath.Join(venv, "bin", "python3")
	entries, _ := json.Marshal(map[string]any{"demo-tools": map[string]any{
		"command": exe, "args": []string{"demo-tools"}, "env": map[string]string{asProgramEnv: "1"}}})
	envConfig := filepath.Join(venv, "etc", "jupyter", "jupyter_server_config.py")
	if err := os.MkdirAll(filepath.Dir(envConfig), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(envConfig, []byte("c.MeganeBuilderTools.mcp_servers = "+string(entries)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	emptyPath := filepath.Join(dir, "empty-path")
	if err := os.Mkdir(emptyPath, 0o755); err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(dir, "ready")
	logFile := filepath.Join(dir, "bridge.log")
	argv, _ := json.Marshal([]string{exe, "serve", "--port", "0", "--ready-file", ready,
		"--receipt-key", filepath.Join(dir, "receipt.key")})
	j := jupytertest.Start(t, jupytertest.Spec{
		Python: venvPython,
		Files: map[string]string{
			"pylib/megane_e2e_spawn.py":       spawnExtension,
			"config/jupyter_server_config.py": "c.ServerApp.jpserver_extensions = {'megane_e2e_spawn': True}\n",
		},
		Env: []string{asProgramEnv + "=1", "MEGANE_E2E_ARGV=" + string(argv), "MEGANE_E2E_LOG=" + logFile,
			"MEGANE_E2E_PATH=" + emptyPath, "GORACE=atexit_sleep_ms=0"},
	})
	addr := waitSpawned(t, ready, logFile)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, _, err := bridgetest.Dial(ctx, "ws://"+addr+"/megane/builder-tools/ws",
		http.Header{"Authorization": {"token " + j.Token}, "Host": {j.HostHdr}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	connectAndCallCrystal(t, p)

	log, _ := os.ReadFile(logFile)
	want := fmt.Sprintf("path=%s found_by=\"the parent process (pid %d)\" sys_prefix=%s ", venvPython, j.Cmd.Process.Pid, venv)
	if !strings.Contains(string(log), want) {
		t.Errorf("the log does not say the Python came from the parent process (%s):\n%s", want, log)
	}
	noCreds(t, string(log), j.Token, "")

	// doctor from a shell: its PATH finds the system's python3 (sys.prefix
	// /usr), not the server's venv; and, with a system-wide jupyter
	// launcher on PATH, that launcher's Python. The PATH is the test's own
	// (jupytertest.HostPath), whatever this machine has in /usr/bin.
	isolateJupyterEnv(t, j)
	hostBin := jupytertest.HostPath(t, "python3")
	t.Setenv("PATH", hostBin)
	out, _, _ := runCLI(t, "doctor")
	want = fmt.Sprintf("warning: Jupyter server pid %d runs %s (sys.prefix %s), but this check used %s (sys.prefix /usr, found by python3 on PATH)", j.Cmd.Process.Pid, venvPython, venv, filepath.Join(hostBin, "python3"))
	if !strings.Contains(out, want) {
		t.Errorf("doctor does not point at the server's own Python; want %q in:\n%s", want, out)
	}
	sysBin := t.TempDir()
	launcher := jupytertest.Launcher(t, sysBin, jupytertest.Python)
	t.Setenv("PATH", sysBin+":"+hostBin)
	out, _, _ = runCLI(t, "doctor")
	want = fmt.Sprintf("warning: Jupyter server pid %d runs %s (sys.prefix %s), but this check used %s (sys.prefix /usr, found by the #! line of %s)", j.Cmd.Process.Pid, venvPython, venv, jupytertest.Python, launcher)
	if !strings.Contains(out, want) {
		t.Errorf("doctor with a jupyter launcher on PATH; want %q in:\n%s", want, out)
	}
	out, _, _ = runCLI(t, "doctor", "--python", venvPython)
	if !strings.Contains(out, "Jupyter's Python: "+venvPython+", found by --python (sys.prefix "+venv+",") || strings.Contains(out, "but this check used") {
		t.Errorf("doctor --python %s:\n%s", venvPython, out)
	}
}

// TestJupyterAllowOriginPat: a server told on its command line to accept
// several Origins (ServerApp.allow_origin_pat, which the bridge cannot read
// from any file) is matched with --allow-origin-pat: without it the bridge
// refuses those pages itself; with it both are admitted, and an Origin the
// pattern does not match is still refused.
func TestJupyterAllowOriginPat(t *testing.T) {
	const pat = `http://(app|lab)\.example$`
	j := jupytertest.Start(t, jupytertest.Spec{Args: []string{"--ServerApp.allow_origin_pat=" + pat}})
	cookie := j.LoginCookie(t)
	isolateJupyterEnv(t, j)
	keyFile := filepath.Join(t.TempDir(), "receipt.key")
	owner := osUser(t)
	args := []string{"--jupyter-url", j.URL, "--servers", demoServersFile(t, nil), "--python", "/usr/bin/python3", "--receipt-key", keyFile}
	page := func(origin string) http.Header { return http.Header{"Cookie": {cookie}, "Origin": {origin}} }

	r := startServe(t, args...)
	checkVerdict(t, r.addr, j.HostHdr, e2eVerdict{header: page("http://app.example"), status: http.StatusForbidden})
	r2 := startServe(t, append(args, "--allow-origin-pat", pat)...)
	for _, tc := range []e2eVerdict{
		{name: "app", header: page("http://app.example"), user: owner},
		{name: "lab", header: page("http://lab.example"), user: owner},
		{name: "not matched", header: page("http://lab.example.evil"), status: http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) { checkVerdict(t, r2.addr, j.HostHdr, tc) })
	}
	for _, r := range []*running{r, r2} {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		noCreds(t, r.stderr.String(), j.Token, cookie)
	}
	if !strings.Contains(r2.stderr.String(), "allow_origin_pat="+pat+"\n") {
		t.Errorf("the log does not show the pattern in force:\n%s", r2.stderr)
	}
}
