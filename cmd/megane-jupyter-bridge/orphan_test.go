package main

// An orphaned bridge must not trust a stranger: when the Jupyter server that
// started it dies, the bridge stops (with its tool servers), and until then,
// as always, only answers positively Jupyter's count.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
)

// orphanExitBound is how soon after its parent's death the bridge and its
// tool servers must be gone (the requirement), and orphanCheckSlack what the
// check adds on a loaded machine (its 20 ms polls of /proc, the test's own
// scheduling); only the sum is asserted.
const (
	orphanExitBound  = 2 * time.Second
	orphanCheckSlack = 1 * time.Second
)

// parentScript stands in for the Jupyter server under jupyter-server-proxy:
// it writes its runtime file, jpserver-<its pid>.json, naming the real
// Jupyter server given as $1 (URL) and $2 (token) with version $3, then
// starts the program ("$@" after those three) as its child and waits.
const parentScript = `printf '{"url": "%s", "base_url": "/", "token": "%s", "password": false, "pid": %d, "version": "%s", "secure": false}' "$1" "$2" $$ "$3" > "$JUPYTER_RUNTIME_DIR/jpserver-$$.json"
shift 3
"$@" &
wait`

// TestOrphanedBridgeExits: the real program, in Jupyter mode, is the child
// of a short-lived parent process (found from the parent's runtime file, as
// under jupyter-server-proxy) and asks a real jupyter_server for verdicts. A
// page is admitted and has a call in flight on a tool server. SIGKILL to the
// parent: the program and its tool server must be gone within
// orphanExitBound (asserted with orphanCheckSlack), and the program must say
// why it stopped. Once with the kernel's notice (PR_SET_PDEATHSIG) and the
// poll, once with the poll alone, which is what is relied on.
func TestOrphanedBridgeExits(t *testing.T) {
	j := jupytertest.Start(t, jupytertest.Spec{})
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"kernel notice and poll", nil},
		{"poll alone", []string{noDeathNoticeEnv + "=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) { orphanBridge(t, j, tc.env) })
	}
}

// orphanBridge is one run of TestOrphanedBridgeExits; env is added to the
// program's environment.
func orphanBridge(t *testing.T, j *jupytertest.Server, env []string) {
	version, err := jupytertest.Version("")
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var rb [6]byte
	rand.Read(rb[:])
	marker := "orphan-" + hex.EncodeToString(rb[:])
	mode, _ := json.Marshal(bridgetest.Mode{Name: "slow-tools"})
	servers, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"slow-tools": map[string]any{"command": exe, "args": []string{"-test.run=^$"},
			"env": map[string]string{bridgetest.EnvVar: string(mode), "MEGANE_FAULT_MARK": marker}},
	}})
	serversFile := filepath.Join(dir, "servers.json")
	if err := os.WriteFile(serversFile, servers, 0o600); err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(dir, "ready")
	runtimeDir := filepath.Join(dir, "runtime")
	if err := os.MkdirAll(runtimeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	pp := &programProcess{stderr: &lockedBuffer{}, exited: make(chan struct{})}
	pp.cmd = exec.Command("/bin/sh", "-c", parentScript, "parent", j.URL, j.Token, version,
		exe, "serve", "--port", "0", "--servers", serversFile, "--python", "none", "--ready-file", ready)
	pp.cmd.Env = append(os.Environ(), asProgramEnv+"=1",
		"HOME="+filepath.Join(dir, "home"), "JUPYTER_CONFIG_DIR="+filepath.Join(dir, "config"),
		"JUPYTER_DATA_DIR="+filepath.Join(dir, "data"), "JUPYTER_RUNTIME_DIR="+runtimeDir,
		"JUPYTER_CONFIG_PATH=", "GORACE=atexit_sleep_ms=0")
	pp.cmd.Env = append(pp.cmd.Env, env...)
	child.InGroup(pp.cmd)
	launchProgram(t, pp, ready)
	parentPid := pp.cmd.Process.Pid

	bridgePid := 0
	for _, pid := range descendants(parentPid) {
		if _, ppid, ok := bridgetest.ProcStat(pid); ok && ppid == parentPid && strings.Contains(cmdlineOf(pid), " serve ") {
			bridgePid = pid
		}
	}
	if bridgePid == 0 {
		t.Fatalf("the program is not a child of the parent %d (descendants %v)", parentPid, descendants(parentPid))
	}
	if want := fmt.Sprintf(`found_by="runtime file %s"`, filepath.Join(runtimeDir, fmt.Sprintf("jpserver-%d.json", parentPid))); !strings.Contains(pp.stderr.String(), want) {
		t.Fatalf("the program did not find its parent from the runtime file (%s):\n%s", want, pp.stderr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, _, err := bridgetest.Dial(ctx, "ws://"+pp.addr+"/megane/builder-tools/ws",
		http.Header{"Authorization": {"token " + j.Token}, "Host": {j.HostHdr}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": 1})
	if err != nil || m.OK == nil || !*m.OK {
		t.Fatalf("not admitted by the real Jupyter server: %v %v\n%s", err, m, pp.stderr)
	}
	var listed []struct{ Name, Fingerprint string }
	json.Unmarshal(m.Fields["servers"], &listed)
	if len(listed) != 1 {
		t.Fatalf("servers: %s", m)
	}
	m, err = p.Request(ctx, map[string]any{"type": "tools:connect", "id": 2, "server": "slow-tools",
		"fingerprint": listed[0].Fingerprint, "confirmed": true})
	if err != nil || m.OK == nil || !*m.OK {
		t.Fatalf("connect: %v %v\n%s", err, m, pp.stderr)
	}
	p.Send(map[string]any{"type": "tools:call", "id": 3, "server": "slow-tools", "tool": "slow",
		"arguments": map[string]any{"steps": 100000, "intervalMs": 20, "tag": "long"}})
	if _, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:progress" }); err != nil {
		t.Fatal(err)
	}
	if len(markedProcs(marker)) == 0 {
		t.Fatal("no tool server process found in /proc")
	}

	if err := killPid(parentPid); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		state, _, alive := bridgetest.ProcStat(bridgePid)
		alive = alive && state != "Z"
		left := markedProcs(marker)
		if !alive && len(left) == 0 {
			break
		}
		if time.Since(start) > orphanExitBound+orphanCheckSlack {
			t.Fatalf("%s after its parent's SIGKILL: program alive %v, tool server processes %v\n%s",
				orphanExitBound+orphanCheckSlack, alive, left, pp.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the program and its tool server were gone %s after the parent's SIGKILL", time.Since(start).Round(time.Millisecond))
	t.Logf("abuse: Jupyter SIGKILLed under a running bridge | bridge and tool server gone within 2 s | gone after %s", time.Since(start).Round(time.Millisecond))
	<-pp.exited // the program's stderr is closed: its log is complete
	if !strings.Contains(pp.stderr.String(), fmt.Sprintf("the process that started the bridge (pid %d", parentPid)) {
		t.Errorf("the program did not say it stopped because its parent exited:\n%s", pp.stderr)
	}
}

// TestStrangerAtParentAddress: the parent's runtime file names an address
// where something other than Jupyter answers (as when Jupyter was
// SIGKILLed and another program took its port): every socket is refused
// with 4503, never admitted, whatever jupyter_server version the file
// claims. The program runs in this process, and the runtime file is this
// process's parent's, as the program looks for it.
func TestStrangerAtParentAddress(t *testing.T) {
	strangers := []struct {
		name  string
		start func(t *testing.T) string // returns the stranger's base URL
	}{
		{"python3 -m http.server", startHTTPServerModule},
		{"404 to everything", func(t *testing.T) string {
			srv := httptest.NewServer(http.NotFoundHandler())
			t.Cleanup(srv.Close)
			return srv.URL + "/"
		}},
		{"GET api as Jupyter 1.23 does, Server: TornadoServer, 404 elsewhere", func(t *testing.T) string {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Server", "TornadoServer/6.2")
				if r.URL.Path == "/api" {
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprint(w, `{"version": "1.23.3"}`)
					return
				}
				http.NotFound(w, r)
			}))
			t.Cleanup(srv.Close)
			return srv.URL + "/"
		}},
	}
	for _, s := range strangers {
		for _, version := range []string{"1.23.3", "2.15.0"} {
			t.Run(s.name+"/"+version, func(t *testing.T) {
				url := s.start(t)
				dir := t.TempDir()
				for _, kv := range [][2]string{{"HOME", filepath.Join(dir, "home")}, {"JUPYTER_CONFIG_DIR", filepath.Join(dir, "config")},
					{"JUPYTER_DATA_DIR", filepath.Join(dir, "data")}, {"JUPYTER_RUNTIME_DIR", dir}, {"JUPYTER_CONFIG_PATH", ""},
					{"JUPYTERHUB_SERVICE_URL", ""}, {"JUPYTERHUB_USER", ""}, {"JUPYTERHUB_API_URL", ""}} {
					t.Setenv(kv[0], kv[1])
				}
				rf, _ := json.Marshal(map[string]any{"url": url, "base_url": "/", "token": "t0ken", "password": false,
					"pid": os.Getppid(), "version": version, "secure": false})
				if err := os.WriteFile(filepath.Join(dir, "jpserver-"+strconv.Itoa(os.Getppid())+".json"), rf, 0o600); err != nil {
					t.Fatal(err)
				}
				r := startServe(t, "--servers", demoServersFile(t, nil), "--python", "none")
				host := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/")
				checkVerdict(t, r.addr, host, e2eVerdict{header: http.Header{"Authorization": {"token t0ken"}},
					code: 4503, reason: "is not Jupyter"})
				if !strings.Contains(r.stderr.String(), "the answer is not the Jupyter server's") {
					t.Errorf("the log does not say why:\n%s", r.stderr)
				}
			})
		}
	}
}

// startHTTPServerModule runs python3 -m http.server on a free loopback port,
// serving an empty directory, and returns its URL once it answers.
func startHTTPServerModule(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		jupytertest.Need(t, "python3", err)
	}
	port := bridgetest.FreePort(t)
	cmd := exec.Command(py, "-m", "http.server", strconv.Itoa(port), "--bind", "127.0.0.1", "--directory", t.TempDir())
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if !strings.HasPrefix(resp.Header.Get("Server"), "SimpleHTTP/") {
				t.Fatalf("something else answers at %s: %s", url, resp.Header.Get("Server"))
			}
			return url
		}
		select {
		case <-exited:
			t.Fatalf("python3 -m http.server exited:\n%s", out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("python3 -m http.server did not answer: %v\n%s", err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killPid kills process pid (SIGKILL; TerminateProcess on Windows).
func killPid(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
