package main

// doctor's check of a registration by its effect: start the registered
// command as jupyter-server-proxy would, for this deployment's base URL, and
// ask it for the path jupyter-server-proxy will forward.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/child"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// proxyEntry is what doctor reads of a jupyter-server-proxy entry: the
// options that decide how the command is started and which path it gets.
type proxyEntry struct {
	Command     []string          `json:"command"`
	AbsoluteURL bool              `json:"absolute_url"`
	Timeout     float64           `json:"timeout"`
	Environment map[string]string `json:"environment"`
	UnixSocket  any               `json:"unix_socket"`
}

// deployment is where the Jupyter server doctor checks for lives.
type deployment struct {
	base   string // its base_url, "/…/"
	source string // how base was found, for the report
	pid    int    // the running server's process, 0 if none was found
	file   string // its runtime file
}

// runtimeFile is one jpserver-<pid>.json of Jupyter's runtime directory.
type runtimeFile struct {
	path  string
	pid   int
	alive bool // the process still runs (possibly as another user)
}

// runtimeFiles lists dir's jpserver-<pid>.json files, sorted by name.
func runtimeFiles(dir string) []runtimeFile {
	files, _ := filepath.Glob(filepath.Join(dir, "jpserver-*.json"))
	sort.Strings(files)
	var out []runtimeFile
	for _, f := range files {
		pid, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "jpserver-"), ".json"))
		if err != nil {
			continue
		}
		out = append(out, runtimeFile{path: f, pid: pid, alive: child.Alive(pid)})
	}
	return out
}

// findDeployment works out the base URL jupyter-server-proxy will fill in:
// the running server's (from its jpserver-*.json), else the JupyterHub
// prefix of this environment, else "/".
func findDeployment() deployment {
	for _, f := range runtimeFiles(jupyter.RuntimeDir(jupyter.Options{})) {
		if !f.alive {
			continue
		}
		var rf struct {
			BaseURL string `json:"base_url"`
		}
		if data, err := os.ReadFile(f.path); err == nil && json.Unmarshal(data, &rf) == nil && rf.BaseURL != "" {
			return deployment{base: normBase(rf.BaseURL), source: "the running server's " + f.path, pid: f.pid, file: f.path}
		}
	}
	if p := os.Getenv("JUPYTERHUB_SERVICE_PREFIX"); p != "" {
		return deployment{base: normBase(p), source: "JUPYTERHUB_SERVICE_PREFIX"}
	}
	if u := os.Getenv("JUPYTERHUB_USER"); u != "" {
		return deployment{base: "/user/" + url.PathEscape(u) + "/", source: "JUPYTERHUB_USER"}
	}
	return deployment{base: "/", source: "no running server or JupyterHub found, Jupyter's default"}
}

// normBase writes a base URL as "/…/" ("/" when empty).
func normBase(b string) string {
	if b = strings.Trim(b, "/"); b == "" {
		return "/"
	}
	return "/" + b + "/"
}

// forwardedPath is the path at which jupyter-server-proxy hands the page's
// socket ({base}megane/builder-tools/ws) to the bridge.
func forwardedPath(base string, absolute bool) string {
	if absolute {
		return base + jupyter.ProxyServerName + "/builder-tools/ws"
	}
	return "/builder-tools/ws"
}

// checkConfigFlag reports when the running server was started with
// --config=FILE, which replaces Jupyter's config files: a registration
// elsewhere is then not read.
func checkConfigFlag(r *report, d deployment, regFiles []string) {
	if d.pid == 0 {
		return
	}
	args, err := processArgs(d.pid)
	if err != nil {
		return
	}
	for i, a := range args {
		var file string
		switch {
		case strings.HasPrefix(a, "--config="):
			file = strings.TrimPrefix(a, "--config=")
		case a == "--config" && i+1 < len(args):
			file = args[i+1]
		default:
			continue
		}
		for _, f := range regFiles {
			if sameFile(f, file) {
				return
			}
		}
		r.add("error", "the running Jupyter server (pid %d) was started with --config=%s, which replaces Jupyter's config files, so it does not read the registration in %s: add ServerProxy.servers.%s to %s (under JupyterHub, check c.Spawner.args)",
			d.pid, file, strings.Join(regFiles, ", "), jupyter.ProxyServerName, file)
		return
	}
}

func sameFile(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// probeRegistration starts entry's command as jupyter-server-proxy would
// for d (a free {port}, {base_url} filled in, its environment added, this
// process as the parent with a runtime file naming d's base URL), waits for
// it to answer GET / as jupyter-server-proxy does, and asks it for the
// forwarded socket path without upgrading. It returns how long the start
// took, or why the bridge would not serve pages.
func probeRegistration(ctx context.Context, e proxyEntry, d deployment) (time.Duration, error) {
	if e.UnixSocket != nil && e.UnixSocket != false {
		return 0, errors.New("the registration uses unix_socket, which this check does not start")
	}
	timeout := time.Duration(e.Timeout * float64(time.Second))
	if timeout <= 0 {
		timeout = 5 * time.Second // jupyter-server-proxy's default
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	fill := strings.NewReplacer("{port}", strconv.Itoa(port), "{base_url}", d.base, "{unix_socket}", "")
	args := make([]string, len(e.Command))
	for i, a := range e.Command {
		args[i] = fill.Replace(a)
	}
	// A runtime file for this process, the bridge's parent here: it names a
	// Jupyter server at d's base URL that is not there. The check needs no
	// verdict, only the paths the bridge answers.
	rt, err := os.MkdirTemp("", "megane-doctor-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(rt)
	rf, _ := json.Marshal(map[string]any{"url": "http://127.0.0.1:9" + d.base, "hostname": "127.0.0.1", "port": 9,
		"base_url": d.base, "secure": false, "token": "", "password": false, "pid": os.Getpid(), "version": "2"})
	if err := os.WriteFile(filepath.Join(rt, "jpserver-"+strconv.Itoa(os.Getpid())+".json"), rf, 0o600); err != nil {
		return 0, err
	}
	env := append(os.Environ(), "JUPYTER_RUNTIME_DIR="+rt)
	for k, v := range e.Environment {
		env = append(env, k+"="+fill.Replace(v))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = env
	child.InGroup(cmd)
	cmd.Cancel = func() error { return child.Interrupt(cmd.Process) } // serve stops its servers on SIGTERM
	cmd.WaitDelay = 5 * time.Second
	var stderr tailBuffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("cannot start %s: %w", args[0], err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() { cancel(); <-exited }()

	client := &http.Client{Timeout: 2 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	root := "http://127.0.0.1:" + strconv.Itoa(port)
	for {
		if resp, err := client.Get(root + "/"); err == nil {
			resp.Body.Close()
			break
		}
		select {
		case <-exited:
			return 0, fmt.Errorf("%s exited before answering (%v)%s", args[0], cmd.ProcessState, stderr.tail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Since(start) > timeout {
			cancel()
			<-exited // stderr is complete and no longer written
			return 0, fmt.Errorf("%s did not answer GET / within the registration's timeout of %s%s", args[0], timeout, stderr.tail())
		}
	}
	ready := time.Since(start)
	path := forwardedPath(d.base, e.AbsoluteURL)
	resp, err := client.Get(root + path)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", path, err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	// A WebSocket path answers a plain GET with 400 and says what it is.
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Builder Tools WebSocket") {
		return 0, fmt.Errorf("it answers %s with %s, not the Builder Tools socket: pages would see the socket drop (1006)", path, resp.Status)
	}
	return ready, nil
}

// tailBuffer keeps the last 2 KiB written to it. Written by exec's copier
// goroutine, read after Wait.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2048 {
		t.b = t.b[len(t.b)-2048:]
	}
	return len(p), nil
}

func (t *tailBuffer) tail() string {
	s := strings.TrimSpace(string(t.b))
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	return "; stderr: " + strings.Join(lines[max(0, len(lines)-3):], " | ")
}
