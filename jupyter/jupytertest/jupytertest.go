// Package jupytertest starts real jupyter_server processes for tests: on a
// free loopback port, with a known token and private HOME, runtime, config,
// data and root directories, on the host (Debian's python3-jupyter-server)
// or inside a chroot (the Debian 13 one that .ci/trixie-chroot.sh builds).
//
// It owns those processes and directories and removes both when the test
// ends. It never reads or writes the machine's own Jupyter directories and
// never decides whether a missing component skips or fails a test on its
// own: Need does, by CI.
package jupytertest

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
)

// Python is the interpreter that runs jupyter_server, on the host and in a
// chroot alike.
const Python = "/usr/bin/python3"

// Need fails the test under CI=true (where .ci/run has installed what is
// missing) and skips it with a message naming the component otherwise.
func Need(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is required under CI: %v", what, err)
	}
	t.Skipf("%s is not available (%v); .ci/run installs it", what, err)
}

// Trixie returns the Debian 13 chroot that .ci/trixie-chroot.sh builds
// ($MEGANE_TRIXIE, else /var/cache/megane-trixie), for jupyter_server 2.x
// and JupyterHub 5; missing, or without root to chroot into it, the test
// fails under CI and is skipped otherwise (Need).
func Trixie(t testing.TB) string {
	t.Helper()
	root := os.Getenv("MEGANE_TRIXIE")
	if root == "" {
		root = "/var/cache/megane-trixie"
	}
	if _, err := os.Stat(filepath.Join(root, ".megane-trixie-ready")); err != nil {
		Need(t, "the trixie chroot (.ci/trixie-chroot.sh)", err)
	}
	if os.Geteuid() != 0 {
		Need(t, "root (to chroot into the trixie chroot)", errors.New("not root"))
	}
	return root
}

// Version is the jupyter_server version of Python on the host (root "") or
// inside the chroot root.
func Version(root string) (string, error) {
	args := []string{Python, "-c", "import jupyter_server; print(jupyter_server.__version__)"}
	if root != "" {
		args = append([]string{"chroot", root}, args...)
	}
	out, err := exec.Command(args[0], args[1:]...).Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Spec says how to start a server. The zero value starts jupyter_server
// on the host with no extra configuration.
type Spec struct {
	// Root is a chroot directory to run the server in; "" means the host.
	Root string
	// Args are extra jupyter_server arguments.
	Args []string
	// Files are written before the server starts, by path relative to its
	// directory: config/ is its JUPYTER_CONFIG_DIR, and config/ and pylib/
	// are on its PYTHONPATH (for authorizer modules and the like).
	Files map[string]string
	// Env adds to the environment of Server.Env.
	Env []string
	// DirEnv sets environment variables to directories inside the
	// server's directory, by relative path (made if missing); e.g.
	// JUPYTER_CONFIG_PATH: "admin" for an env-level config directory.
	DirEnv map[string]string
	// Python is the interpreter that runs jupyter_server (a venv's
	// bin/python3, say); "" means Python.
	Python string
	// Sock makes the server listen on the unix socket Server.Sock instead
	// of a TCP port (ServerApp.sock); URL and HostHdr then name no port.
	Sock bool
	// BaseURL is ServerApp.base_url ("/lab/base/"); "" means "/". URL
	// includes it.
	BaseURL string
	// ServerProxy loads the jupyter-server-proxy stand-in (see
	// ServerProxyModule), which serves c.ServerProxy.servers.
	ServerProxy bool
	// RealServerProxy loads the real jupyter-server-proxy 4.4.0 from
	// ../shared/vendor (see RealServerProxy): it needs jupyter_server >=
	// 1.24, so the Debian 13 chroot, not Debian 12's 1.23. In a chroot, the
	// server then runs in a mount namespace of its own with /proc mounted,
	// which the bridge it starts needs.
	RealServerProxy bool
}

// ServerProxyModule is the Python module of the test stand-in for
// jupyter-server-proxy 4.4 (megane_test_server_proxy.py beside this file:
// what it does is in its docstring). WriteServerProxy puts it in a
// directory on a server's PYTHONPATH; jpserver_extensions loads it.
const ServerProxyModule = "megane_test_server_proxy"

//go:embed megane_test_server_proxy.py
var serverProxySource []byte

// WriteServerProxy writes the stand-in's module into dir, and into
// configDir a jupyter_server_config.d fragment that enables it.
func WriteServerProxy(t testing.TB, dir, configDir string) {
	t.Helper()
	frag := filepath.Join(configDir, "jupyter_server_config.d")
	if err := os.MkdirAll(frag, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ServerProxyModule+".py"), serverProxySource, 0o644); err != nil {
		t.Fatal(err)
	}
	enable := `{"ServerApp": {"jpserver_extensions": {"` + ServerProxyModule + `": true}}}`
	if err := os.WriteFile(filepath.Join(frag, ServerProxyModule+".json"), []byte(enable), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Server is a running jupyter_server.
type Server struct {
	Port    int
	URL     string // "http://127.0.0.1:<port>/"
	HostHdr string // "127.0.0.1:<port>", the Host a browser sends
	Token   string
	// Dir holds home, runtime, config, data, root and pylib, as seen from
	// the host; Inner is the same directory as the server sees it (Dir
	// without the chroot prefix).
	Dir, Inner string
	Cmd        *exec.Cmd
	Out        *bridgetest.Buffer // its stdout and stderr
	// Sock is the unix socket it listens on (host view), if Spec.Sock.
	Sock string
	// Client reaches the server: through Sock when it listens there.
	Client *http.Client

	root string
	env  []string
	done chan struct{} // closed by the waiter goroutine once Cmd.Wait returned
}

// Path is name inside the server's directory, as seen from the host.
func (s *Server) Path(name string) string { return filepath.Join(s.Dir, name) }

// Env is the environment the server runs with, with the server's own view
// of its directories; a program it starts inherits it.
func (s *Server) Env() []string { return append([]string(nil), s.env...) }

// Getenv is what a program the server starts (as jupyter-server-proxy
// starts the bridge) finds for the variables that locate the server's
// runtime file, as seen from the host: for jupyter.ParentOptions.Getenv.
func (s *Server) Getenv(k string) string {
	switch k {
	case "JUPYTER_RUNTIME_DIR":
		return s.Path("runtime")
	case "HOME":
		return s.Path("home")
	}
	return ""
}

// Done is closed once the server has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// Start starts jupyter_server as spec says and waits (up to 60 s) until it
// answers GET /api/status with its token. The server and everything it
// starts run in their own process group, stopped when the test ends.
func Start(t testing.TB, spec Spec) *Server {
	t.Helper()
	if _, err := Version(spec.Root); err != nil {
		Need(t, "jupyter_server", err)
	}
	// Inside a chroot the directories must live under the root.
	tmp := os.TempDir()
	if spec.Root != "" {
		tmp = filepath.Join(spec.Root, "tmp")
	}
	dir, err := os.MkdirTemp(tmp, "megane-jupyter-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &Server{Dir: dir, Inner: strings.TrimPrefix(dir, spec.Root), Token: token(t), Port: bridgetest.FreePort(t),
		Out: &bridgetest.Buffer{}, root: spec.Root, done: make(chan struct{})}
	base := spec.BaseURL
	if base == "" {
		base = "/"
	}
	s.URL = "http://127.0.0.1:" + strconv.Itoa(s.Port) + base
	s.HostHdr = "127.0.0.1:" + strconv.Itoa(s.Port)
	s.Client = &http.Client{}
	if spec.Sock {
		s.Sock = s.Path("jupyter.sock")
		s.URL, s.HostHdr = "http://localhost/", "localhost"
		s.Client.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", s.Sock)
		}}
	}
	for _, d := range []string{"home", "runtime", "config", "data", "root", "pylib"} {
		if err := os.MkdirAll(s.Path(d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if spec.ServerProxy {
		WriteServerProxy(t, s.Path("pylib"), s.Path("config"))
	}
	if spec.RealServerProxy {
		RealServerProxy(t, spec.Root, s.Path("pylib"), s.Path("config"))
	}
	for name, text := range spec.Files {
		if err := os.MkdirAll(filepath.Dir(s.Path(name)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s.Path(name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	in := func(name string) string { return filepath.Join(s.Inner, name) }
	s.env = append([]string{
		"HOME=" + in("home"),
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"LANG=C.UTF-8",
		"JUPYTER_RUNTIME_DIR=" + in("runtime"),
		"JUPYTER_CONFIG_DIR=" + in("config"),
		"JUPYTER_DATA_DIR=" + in("data"),
		"PYTHONPATH=" + in("config") + ":" + in("pylib"),
	}, spec.Env...)
	for k, rel := range spec.DirEnv {
		if err := os.MkdirAll(s.Path(rel), 0o700); err != nil {
			t.Fatal(err)
		}
		s.env = append(s.env, k+"="+in(rel))
	}

	py := spec.Python
	if py == "" {
		py = Python
	}
	args := []string{py, "-m", "jupyter_server", "--no-browser", "--allow-root",
		"--ServerApp.token=" + s.Token, "--ServerApp.root_dir=" + in("root")}
	if spec.Sock {
		// jupyter_server refuses a port together with a socket.
		args = append(args, "--ServerApp.sock="+in("jupyter.sock"))
	} else {
		args = append(args, "--ServerApp.ip=127.0.0.1", "--ServerApp.port="+strconv.Itoa(s.Port), "--ServerApp.port_retries=0")
	}
	if spec.BaseURL != "" {
		args = append(args, "--ServerApp.base_url="+spec.BaseURL)
	}
	args = append(args, spec.Args...)
	if spec.Root != "" && spec.RealServerProxy {
		// As StartHub does: unshare execs, so the server keeps this
		// process's id and group.
		chroot, err := exec.LookPath("chroot")
		if err != nil {
			chroot = "/usr/sbin/chroot"
		}
		args = append([]string{"unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
			`mount -t proc proc "$1/proc" && exec "$0" "$@"`, chroot, spec.Root}, args...)
	} else if spec.Root != "" {
		args = append([]string{"chroot", spec.Root}, args...)
	}
	s.Cmd = exec.Command(args[0], args[1:]...)
	s.Cmd.Env = s.Env()
	s.Cmd.Stdout, s.Cmd.Stderr = s.Out, s.Out
	child.InGroup(s.Cmd)
	if err := s.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.Cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("jupyter_server output:\n%s", s.Out)
		}
	})

	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequest("GET", s.URL+"api/status", nil)
		req.Header.Set("Authorization", "token "+s.Token)
		if resp, err := s.Client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case <-s.done:
			t.Fatalf("jupyter_server exited:\n%s", s.Out)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("jupyter_server did not answer within 60 s:\n%s", s.Out)
		}
	}
}

// stopPatience is how long Stop waits for the server to shut down on
// SIGINT before it kills it. Killed, the server leaves its runtime file
// behind, which is what tells a bridge its parent has stopped: on two busy
// cores (CI's race tests beside it) jupyter_server 1.23 once took more
// than 10 s to shut down, and a test of that verdict failed.
const stopPatience = 45 * time.Second

// Stop stops the server's process group: SIGTERM, then SIGKILL after
// stopPatience; then SIGKILL to the group again, so nothing it started
// outlives it.
func (s *Server) Stop() {
	select {
	case <-s.done:
	default:
		child.Interrupt(s.Cmd.Process)
		select {
		case <-s.done:
		case <-time.After(stopPatience):
			child.KillGroup(s.Cmd.Process)
			<-s.done
		}
	}
	child.KillGroup(s.Cmd.Process)
}

// LoginCookie logs in with the token through /login, as a browser does
// (the _xsrf cookie flow), and returns the Cookie header the browser then
// sends.
func (s *Server) LoginCookie(t testing.TB) string {
	t.Helper()
	client := &http.Client{Transport: s.Client.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(s.URL + "login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var xsrf string
	for _, c := range resp.Cookies() {
		if c.Name == "_xsrf" {
			xsrf = c.Value
		}
	}
	if xsrf == "" {
		t.Fatalf("GET /login set no _xsrf cookie (%s)", resp.Status)
	}
	form := url.Values{"_xsrf": {xsrf}, "password": {s.Token}}
	req, _ := http.NewRequest("POST", s.URL+"login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: "_xsrf", Value: xsrf})
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if strings.HasPrefix(c.Name, "username-") {
			return "_xsrf=" + xsrf + "; " + c.Name + "=" + c.Value
		}
	}
	t.Fatalf("POST /login set no username-* cookie (%s)", resp.Status)
	return ""
}

// token is a fresh random token.
func token(t testing.TB) string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}
