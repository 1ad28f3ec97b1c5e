package main

// The wheel as users install it: make wheels builds the Linux wheel, pip
// installs it into a fresh venv that sees the system's jupyter_server, and
// the jupyter-server-proxy stand-in, running in that venv, finds the bridge
// only through the wheel's jupyter_serverproxy_servers entry point (no
// ServerProxy.servers anywhere), starts its command line and serves the page.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter/wheel"
)

// entryPointsScript prints, as JSON, every jupyter_serverproxy_servers
// entry point as jupyter-server-proxy reads it (importlib.metadata, then
// load() and a call with no arguments), with the distribution that holds it.
const entryPointsScript = `
import json, sys
from importlib.metadata import entry_points
out = []
for ep in entry_points(group="jupyter_serverproxy_servers"):
    d = {"name": ep.name, "value": ep.value, "dist": ep.dist.name if ep.dist else None}
    try:
        d["options"] = ep.load()()
    except Exception as e:
        d["error"] = repr(e)
    out.append(d)
json.dump(out, sys.stdout)
`

// run runs name with args and returns its combined output, failing the test
// if it fails.
func runOK(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// buildLinuxWheel runs make wheels for this machine's Linux platform into
// a temporary directory and returns the wheel.
func buildLinuxWheel(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the wheel test installs the Linux wheel")
	}
	if _, err := exec.LookPath("make"); err != nil {
		jupytertest.Need(t, "make", err)
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	dist := t.TempDir()
	runOK(t, root, "make", "--no-print-directory", "wheels", "WHEEL_PLATFORMS=linux/"+runtime.GOARCH, "DIST="+dist)
	wheels, _ := filepath.Glob(filepath.Join(dist, "*.whl"))
	if len(wheels) != 1 {
		t.Fatalf("make wheels wrote %v into %s, want one wheel", wheels, dist)
	}
	return wheels[0]
}

// TestWheelInstall: the Linux wheel carries the right name, version,
// requirements, tags and an executable binary; pip installs it into a
// fresh venv (with the system's jupyter_server); its entry point loads
// through importlib.metadata and gives the registration install writes,
// with the installed binary (same version) as the command; and that
// command line, started by the jupyter-server-proxy stand-in from the entry
// point alone, serves the page through Jupyter at two base URLs.
func TestWheelInstall(t *testing.T) {
	py := jupytertest.Python
	if err := exec.Command(py, "-c", "import venv, ensurepip").Run(); err != nil {
		jupytertest.Need(t, "python3-venv", err)
	}
	if _, err := jupytertest.Version(""); err != nil {
		jupytertest.Need(t, "jupyter_server", err)
	}
	whl := buildLinuxWheel(t)

	// The wheel as an installer reads it.
	info, err := wheel.Verify(whl)
	if err != nil {
		t.Fatal(err)
	}
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
	for _, c := range []struct{ what, got, want string }{
		{"name", info.Name, "megane_jupyter_bridge"},
		{"version", info.Version, version},
		{"tags", strings.Join(info.Tags, "."), "manylinux_2_17_" + arch + ".manylinux2014_" + arch + ".musllinux_1_1_" + arch},
		{"Metadata-Version", info.Metadata["Metadata-Version"], "2.4"},
		{"License-Expression", info.Metadata["License-Expression"], "MIT AND Apache-2.0 AND BSD-2-Clause AND BSD-3-Clause"},
		{"Requires-Dist", strings.Join(info.RequiresDist, ", "), "jupyter-server-proxy>=4"},
		{"Requires-Python", info.Metadata["Requires-Python"], ">=3.9"},
		{"built by", info.GoVersion, pinnedGo(t)},
		{"binary mode", info.Files["megane_jupyter_bridge/bin/megane-jupyter-bridge"].String(), "-rwxr-xr-x"},
	} {
		if c.got != c.want {
			t.Errorf("wheel %s: %q, want %q", c.what, c.got, c.want)
		}
	}
	if info.Metadata["Summary"] == "" {
		t.Errorf("wheel metadata without Summary: %v", info.Metadata)
	}
	// The wheel tool's own check of RECORD (hashes and sizes).
	if err := exec.Command(py, "-c", "import wheel").Run(); err != nil {
		jupytertest.Need(t, "python3-wheel", err)
	} else {
		runOK(t, t.TempDir(), py, "-m", "wheel", "unpack", whl)
	}

	// pip install into a fresh venv. --no-deps: jupyter-server-proxy, the
	// wheel's requirement, cannot be installed here; pip check must name it.
	venv := filepath.Join(t.TempDir(), "venv")
	runOK(t, "", py, "-m", "venv", "--system-site-packages", venv)
	vpy := filepath.Join(venv, "bin", "python3")
	runOK(t, "", vpy, "-m", "pip", "install", "--no-index", "--no-deps", "--disable-pip-version-check", whl)
	check, _ := exec.Command(vpy, "-m", "pip", "check").CombinedOutput()
	if !strings.Contains(string(check), "megane-jupyter-bridge "+version+" requires jupyter-server-proxy") {
		t.Errorf("pip check does not report the missing jupyter-server-proxy requirement:\n%s", check)
	}

	// The entry point, as jupyter-server-proxy loads it.
	var eps []struct {
		Name, Value, Dist, Error string
		Options                  json.RawMessage
	}
	if err := json.Unmarshal([]byte(runOK(t, "", vpy, "-c", entryPointsScript)), &eps); err != nil {
		t.Fatal(err)
	}
	if len(eps) != 1 || eps[0].Name != jupyter.ProxyServerName || eps[0].Error != "" || eps[0].Dist != wheel.Name {
		t.Fatalf("jupyter_serverproxy_servers entry points in the venv: %+v", eps)
	}
	var opts jupyter.ProxyRegistration
	dec := json.NewDecoder(bytes.NewReader(eps[0].Options))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&opts); err != nil || len(opts.Command) == 0 {
		t.Fatalf("the entry point's options %s: %v", eps[0].Options, err)
	}
	bin := opts.Command[0]
	if !filepath.IsAbs(bin) || !strings.HasPrefix(bin, venv+string(filepath.Separator)) {
		t.Errorf("command[0] %s is not an absolute path inside the venv %s", bin, venv)
	}
	if want := jupyter.Registration(bin, "", false); !jupyter.IsBridgeRegistration(eps[0].Options) || opts.AbsoluteURL || opts.Timeout != want.Timeout || opts.LauncherEntry.Enabled {
		t.Errorf("the entry point's options %s differ from the registration install writes", eps[0].Options)
	}
	if fi, err := os.Stat(bin); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Fatalf("command[0] %s is not an executable file: %v %v", bin, fi.Mode(), err)
	}
	// The installed binary, and the console script, are this version, and
	// say the commit mkwheel stamped (-X main.commit: the wheel's build has
	// no VCS stamp of go build's own).
	head, gitErr := exec.Command("git", "rev-parse", "HEAD").Output()
	for _, cmd := range [][]string{{bin, "version"}, {filepath.Join(venv, "bin", "megane-jupyter-bridge"), "version"}, {vpy, "-m", "megane_jupyter_bridge", "version"}} {
		out := runOK(t, "", cmd[0], cmd[1:]...)
		lines := strings.Split(out, "\n")
		if lines[0] != "megane-jupyter-bridge "+version || !strings.Contains(out, "\ncommit: ") || !strings.Contains(out, "\ngo: "+pinnedGo(t)+" linux/") {
			t.Errorf("%s: %q, want version %s, a commit line and go %s (go.mod's toolchain line: make wheels builds with it)", strings.Join(cmd, " "), out, version, pinnedGo(t))
		}
		if gitErr == nil && !strings.Contains(out, "\ncommit: "+strings.TrimSpace(string(head))) {
			t.Errorf("%s: %q, want the commit line to name HEAD, %s", strings.Join(cmd, " "), out, head)
		}
	}

	// doctor, run through the console script, finds the entry point,
	// starts it and sees the socket path served; a configured registration
	// of another binary is served instead of it, which doctor says.
	home := t.TempDir()
	cfgFile := filepath.Join(home, "cfg", "jupyter_server_config.json")
	os.MkdirAll(filepath.Dir(cfgFile), 0o700)
	// Jupyter is installed in the venv, as in a real one: a jupyter
	// launcher of its own (what pip install jupyter_server writes) comes
	// first, so whatever launcher this machine has in /usr/bin never
	// decides which Python doctor checks (CONFIG.md's order).
	// And jupyter-server-proxy, which pip would pull in with the wheel:
	// the real package (../shared/vendor), on PYTHONPATH; doctor only
	// finds it (it needs jupyter_server >= 1.24 to run, newer than Debian
	// 12's).
	jupytertest.Launcher(t, filepath.Join(venv, "bin"), vpy)
	proxyLib := t.TempDir()
	vendored, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "vendor", "jupyter-server-proxy-4.4.0", "jupyter_server_proxy"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(vendored, "__init__.py")); err != nil {
		t.Fatalf("the real jupyter-server-proxy is not in ../shared/vendor: %v", err)
	}
	if err := os.Symlink(vendored, filepath.Join(proxyLib, "jupyter_server_proxy")); err != nil {
		t.Fatal(err)
	}
	doctorEnv := []string{"HOME=" + home, "LANG=C.UTF-8", "PATH=" + filepath.Join(venv, "bin") + ":" + jupytertest.HostPath(t, "python3"), "PYTHONPATH=" + proxyLib,
		"JUPYTER_CONFIG_DIR=" + filepath.Dir(cfgFile), "JUPYTER_DATA_DIR=" + filepath.Join(home, "data"),
		"JUPYTER_RUNTIME_DIR=" + filepath.Join(home, "runtime"), "JUPYTERHUB_SERVICE_PREFIX=/user/alice/", asProgramEnv + "=1"}
	otherReg, _ := json.Marshal(map[string]any{"ServerProxy": map[string]any{"servers": map[string]any{
		jupyter.ProxyServerName: jupyter.Registration(os.Args[0], "", false)}}})
	for _, tc := range []struct {
		name, config string
		want         []string
		unwanted     []string
		warnings     int // exactly so many; -1: any
	}{
		{"entry point only", `{}`,
			[]string{`ok:      registered with jupyter-server-proxy as "megane" through the jupyter_serverproxy_servers entry point megane (megane_jupyter_bridge:setup_megane) of megane-jupyter-bridge ` + version + `, running ` + bin + `: started as jupyter-server-proxy would for base_url /user/alice/ (JUPYTERHUB_SERVICE_PREFIX)`},
			[]string{"not this binary", "registered twice", "not registered", "error:"},
			// The image of CONFIG.md without uv: the default server cannot
			// start, which is the one warning; doctor exits 0 (issue 26).
			1},
		{"configured registration of another binary", string(otherReg),
			[]string{"warning: the bridge is registered twice: ServerProxy.servers.megane in " + cfgFile + " is served, not the entry point of megane-jupyter-bridge " + version + " (pip)",
				`ok:      registered with jupyter-server-proxy as "megane" in ` + cfgFile},
			nil, -1},
	} {
		os.WriteFile(cfgFile, []byte(tc.config), 0o600)
		cmd := exec.Command(filepath.Join(venv, "bin", "megane-jupyter-bridge"), "doctor")
		cmd.Env = doctorEnv
		out, err := cmd.CombinedOutput()
		if tc.warnings >= 0 {
			if n := strings.Count(string(out), "\nwarning: ") + map[bool]int{true: 1}[strings.HasPrefix(string(out), "warning: ")]; err != nil || n != tc.warnings ||
				!strings.Contains(string(out), "warning: megane-builder-tools cannot start: neither megane-builder-tools nor uvx was found") {
				t.Errorf("doctor, %s: exit %v with %d warnings, want exit 0 with %d (megane-builder-tools cannot start):\n%s", tc.name, err, n, tc.warnings, out)
			}
			strictCmd := exec.Command(cmd.Path, "doctor", "--strict")
			strictCmd.Env = doctorEnv
			if out, err := strictCmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "--strict counts them") {
				t.Errorf("doctor --strict, %s: exit %v, want 1 for the warning:\n%s", tc.name, err, out)
			}
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("doctor, %s: lacks %q:\n%s", tc.name, w, out)
			}
		}
		for _, w := range tc.unwanted {
			if strings.Contains(string(out), w) {
				t.Errorf("doctor, %s: says %q:\n%s", tc.name, w, out)
			}
		}
	}

	// The admin's setup of issue 37: a venv made over the distribution's
	// Jupyter (--system-site-packages, no jupyter launcher of its own), the
	// wheel pip-installed there, the venv active, and the system's jupyter
	// launcher (its #! line: /usr/bin/python3, which PEP 668 manages) next
	// on PATH. doctor judges the venv's Python, which the console script
	// runs, says so in its first line, exits 0, and says how to start
	// Jupyter so that it sees the venv; install --sys-prefix writes into
	// the venv, not /usr/etc/jupyter.
	os.Remove(filepath.Join(venv, "bin", "jupyter"))
	sysBin := t.TempDir()
	sysLauncher := jupytertest.Launcher(t, sysBin, "/usr/bin/python3")
	venvEnv := []string{"VIRTUAL_ENV=" + venv}
	for _, kv := range doctorEnv {
		if strings.HasPrefix(kv, "PATH=") {
			kv = "PATH=" + filepath.Join(venv, "bin") + ":" + sysBin + ":" + jupytertest.HostPath(t, "python3")
		}
		venvEnv = append(venvEnv, kv)
	}
	os.WriteFile(cfgFile, []byte(`{}`), 0o600)
	doctor := exec.Command(filepath.Join(venv, "bin", "megane-jupyter-bridge"), "doctor")
	doctor.Env = venvEnv
	out, err := doctor.CombinedOutput()
	first, _, _ := strings.Cut(string(out), "\n")
	if want := "ok:      Jupyter's Python: " + vpy + ", found by the Python environment the bridge is installed in (" + venv + ")"; err != nil || !strings.HasPrefix(first, want) ||
		!strings.Contains(string(out), "warning: jupyter on PATH ("+sysLauncher+") runs /usr/bin/python3, which does not see "+venv+"'s packages") ||
		!strings.Contains(string(out), "start Jupyter with "+vpy+" -m jupyter lab") {
		t.Errorf("doctor in a venv over the system's Jupyter: exit %v, first line %q, want exit 0, %q first, and how to start Jupyter from the venv:\n%s", err, first, want, out)
	}
	install := exec.Command(filepath.Join(venv, "bin", "megane-jupyter-bridge"), "install", "--sys-prefix")
	install.Env = venvEnv
	if out, err := install.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "--sys-prefix: "+venv+", the sys.prefix of "+vpy) ||
		!strings.Contains(string(out), filepath.Join(venv, "etc", "jupyter", "jupyter_server_config.json")) {
		t.Errorf("install --sys-prefix from the venv: exit %v, want it to write %s/etc/jupyter and say why:\n%s", err, venv, out)
	}
	uninstall := exec.Command(filepath.Join(venv, "bin", "megane-jupyter-bridge"), "uninstall", "--sys-prefix")
	uninstall.Env = venvEnv
	if out, err := uninstall.CombinedOutput(); err != nil || !strings.Contains(string(out), "removed") {
		t.Errorf("uninstall --sys-prefix from the venv: exit %v:\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(venv, "etc")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("uninstall --sys-prefix left %s/etc, which install made (%v)", venv, err)
	}
	// The system's Python without jupyter-server-proxy: the advice is a
	// venv, never a pip install that PEP 668 refuses.
	sysDoctor := exec.Command(filepath.Join(venv, "bin", "megane-jupyter-bridge"), "doctor", "--python", "/usr/bin/python3")
	sysDoctor.Env = slices.DeleteFunc(slices.Clone(venvEnv), func(kv string) bool { return strings.HasPrefix(kv, "PYTHONPATH=") })
	if out, _ := sysDoctor.CombinedOutput(); !strings.Contains(string(out), "error:   jupyter-server-proxy is not installed for /usr/bin/python3: /usr/bin/python3 is the system's (PEP 668: its pip refuses to install), so make a venv") {
		t.Errorf("doctor --python /usr/bin/python3: want the venv advice for PEP 668:\n%s", out)
	}

	// Jupyter in the venv, the stand-in registering servers from entry
	// points: only the tool servers are configured.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"MeganeBuilderTools": map[string]any{"mcp_servers": map[string]any{
		jupyter.DefaultServerName: nil,
		"bridgetest": map[string]any{"command": exe, "args": []string{"-test.run=^$"},
			"env": map[string]string{bridgetest.EnvVar: strings.TrimPrefix(bridgetest.Mode{}.Env(), bridgetest.EnvVar+"=")}},
	}}})
	for _, base := range []string{"/", "/user/alice/"} {
		t.Run("base_url="+base, func(t *testing.T) {
			j := jupytertest.Start(t, jupytertest.Spec{Python: vpy, BaseURL: base, ServerProxy: true,
				Files: map[string]string{"config/jupyter_server_config.json": string(cfg)}})
			token := http.Header{"Authorization": {"token " + j.Token}}
			p, _, err := proxiedPage(t, j.URL, "", token)
			if err != nil {
				t.Fatalf("the socket through Jupyter at %s: %v\n%s", j.URL, err, j.Out)
			}
			connectBridgetest(t, p)
			if res := callAtoms(t, p, "a", 30); !strings.Contains(string(res), `"water-30"`) {
				t.Fatalf("atoms result: %.300s", res)
			}
			if status, body := httpGet(t, j.URL+"megane/builder-tools/", token); status != 200 || !strings.Contains(body, "app.js") {
				t.Fatalf("status page: %d %.300s", status, body)
			}
			if _, resp, err := proxiedPage(t, j.URL, "", nil); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Errorf("no credentials: want HTTP 403 from Jupyter, got %v %v", resp, err)
			}
			out := j.Out.String()
			if !strings.Contains(out, "megane_test_server_proxy: entry point megane (megane_jupyter_bridge:setup_megane)") ||
				!strings.Contains(out, "megane_test_server_proxy: starting ['"+bin+"', 'serve'") {
				t.Errorf("the stand-in did not start the wheel's binary from its entry point:\n%s", out)
			}
		})
	}
}

// pinnedGo is go.mod's toolchain line (go1.27.3): the Go make wheels
// builds every binary with, whatever Go runs the test.
func pinnedGo(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^toolchain (go\S+)\r?$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod has no toolchain line")
	}
	return string(m[1])
}
