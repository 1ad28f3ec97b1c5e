package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
)

// smokeVenvEnv names a virtual environment into which the wheel for this
// system, jupyter_server and the real jupyter-server-proxy were
// pip-installed from PyPI: what the platform jobs of
// .github/workflows/ci.yml make on Linux, macOS and Windows.
const smokeVenvEnv = "MEGANE_SMOKE_VENV"

// TestInstalledWheel: on the user's own system, the wheel pip-installed
// beside jupyter_server and the real jupyter-server-proxy is the whole
// installation. jupyter_server runs at base URL /user/alice/; a page
// connects through it with the server's token, confirms the demo tool
// server (the wheel's own console script, `demo-tools`) and calls crystal;
// then the Jupyter server is killed without warning, and the bridge and
// the tool server must be gone within 10 s (the bridge watches its
// parent; the tool server dies with the bridge). It runs where
// MEGANE_SMOKE_VENV names such an environment (the GitHub workflow; PyPI
// is out of reach from this project's own machines, and jupyter-server-proxy
// 4 needs a newer jupyter_server than Debian 12's, so .ci/run does not).
func TestInstalledWheel(t *testing.T) {
	venv := os.Getenv(smokeVenvEnv)
	if venv == "" {
		t.Skipf("%s is not set: this test runs in the platform jobs of .github/workflows/ci.yml, on a venv with the wheel, jupyter_server and jupyter-server-proxy from PyPI", smokeVenvEnv)
	}
	// bin on Unix, Scripts on Windows: whichever the venv has.
	binDir := filepath.Join(venv, "bin")
	if _, err := os.Stat(binDir); err != nil {
		binDir = filepath.Join(venv, "Scripts")
	}
	find := func(name string) string {
		for _, n := range []string{name, name + ".exe"} {
			if p := filepath.Join(binDir, n); fileExists(p) {
				return p
			}
		}
		t.Fatalf("%s has no %s", binDir, name)
		return ""
	}
	jupyterServer := find("jupyter-server")
	bridgeScript := find("megane-jupyter-bridge")

	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "config")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"MeganeBuilderTools": map[string]any{"mcp_servers": map[string]any{
		"megane-builder-tools": nil,
		"demo-tools":           map[string]any{"command": bridgeScript, "args": []string{"demo-tools"}},
	}}})
	if err := os.WriteFile(filepath.Join(cfgDir, "jupyter_server_config.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	var rb [16]byte
	rand.Read(rb[:])
	token := hex.EncodeToString(rb[:])
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(jupyterServer, "--no-browser", "--port="+strconv.Itoa(port), "--ip=127.0.0.1",
		"--ServerApp.base_url=/user/alice/", "--IdentityProvider.token="+token, "--ServerApp.root_dir="+dir, "--allow-root")
	cmd.Env = append(os.Environ(), "JUPYTER_CONFIG_DIR="+cfgDir, "JUPYTER_DATA_DIR="+filepath.Join(dir, "data"),
		"JUPYTER_RUNTIME_DIR="+filepath.Join(dir, "runtime"), "JUPYTER_CONFIG_PATH=", "HOME="+dir, "USERPROFILE="+dir)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed once cmd.Wait returned
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	base := fmt.Sprintf("http://127.0.0.1:%d/user/alice/", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequest("GET", base+"api/status", nil)
		req.Header.Set("Authorization", "token "+token)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case <-exited:
			t.Fatalf("jupyter_server exited before it answered:\n%s", out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("jupyter_server did not answer within 60 s:\n%s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, _, err := bridgetest.Dial(ctx, fmt.Sprintf("ws://127.0.0.1:%d/user/alice/megane/builder-tools/ws", port),
		http.Header{"Authorization": {"token " + token}})
	if err != nil {
		t.Fatalf("the socket through jupyter-server-proxy: %v\n%s", err, out)
	}
	defer p.Close()
	connectAndCallCrystal(t, p)

	// Everything the Jupyter server started: the bridge and its tool server.
	var started []int
	for _, pr := range child.Tree(-1, cmd.Process.Pid) {
		if pr.PID != cmd.Process.Pid {
			started = append(started, pr.PID)
		}
	}
	if len(started) == 0 {
		t.Fatalf("no process under the Jupyter server (pid %d): the bridge should be one", cmd.Process.Pid)
	}
	cmd.Process.Kill()
	<-exited
	gone := time.Now().Add(10 * time.Second)
	for {
		var alive []int
		for _, pid := range started {
			if child.Alive(pid) {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 {
			break
		}
		if time.Now().After(gone) {
			t.Fatalf("processes the Jupyter server started are still alive 10 s after it was killed: %v", alive)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the wheel on this system: page served through jupyter-server-proxy at /user/alice/, crystal called, %d processes gone after the Jupyter server was killed", len(started))
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}
