package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
)

// adminSandbox points HOME, JUPYTER_* and PATH at a temporary directory for
// the admin subcommands (which read the process environment).
type adminSandbox struct {
	dir, cfgDir, bin string
}

func newAdminSandbox(t *testing.T) *adminSandbox {
	t.Helper()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	s := &adminSandbox{dir: dir, cfgDir: filepath.Join(dir, "cfg"), bin: filepath.Join(dir, "bin")}
	for _, d := range []string{s.cfgDir, s.bin, filepath.Join(dir, "home"), filepath.Join(dir, "runtime")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", filepath.Join(dir, "home"))
	t.Setenv("JUPYTER_CONFIG_DIR", s.cfgDir)
	t.Setenv("JUPYTER_RUNTIME_DIR", filepath.Join(dir, "runtime"))
	t.Setenv("JUPYTER_CONFIG_PATH", "")
	t.Setenv("PATH", s.bin+":/usr/bin:/bin")
	return s
}

func (s *adminSandbox) write(t *testing.T, rel, text string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(s.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), err
}

// needPython3Jupyter: the doctor and install tests use Debian's Python
// with jupyter_server to find sys.prefix and evaluate files.
func needPython3Jupyter(t *testing.T) {
	t.Helper()
	if _, err := jupytertest.Version(""); err != nil {
		jupytertest.Need(t, "python3-jupyter-server", err)
	}
}

func TestServersJSON(t *testing.T) {
	s := newAdminSandbox(t)
	s.write(t, "bin/uvx", "#!/bin/sh\n", 0o755)
	s.write(t, "cfg/jupyter_server_config.json", `{"MeganeBuilderTools": {"mcp_servers": {
		"lab": {"url": "https://lab.example/mcp", "headers": {"Authorization": "Bearer SECRET-VALUE"}},
		"bad": {"url": "http://lab.example/mcp"}
	}}}`, 0o644)
	out, _, err := runCLI(t, "servers", "--json", "--python", "none")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "SECRET-VALUE") {
		t.Fatal("servers --json printed a header value")
	}
	var got serversJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(got.Servers) != 2 || got.Servers[0].Name != "lab" || got.Servers[0].Headers[0] != "Authorization" || got.Servers[1].Name != "megane-builder-tools" {
		t.Errorf("servers: %+v", got.Servers)
	}
	if !strings.HasPrefix(got.Servers[1].CommandLine, filepath.Join(s.bin, "uvx")+" --from git+https://github.com/hodakamori/megane-builder-tools@") {
		t.Errorf("default server command line %q", got.Servers[1].CommandLine)
	}
	if len(got.Problems) != 1 || !strings.Contains(got.Problems[0].Message, `server "bad": url must use https`) || got.Problems[0].Server != "bad" {
		t.Errorf("problems: %+v", got.Problems)
	}
	if got.UserFile == nil || got.UserFile.Path != filepath.Join(s.cfgDir, "jupyter_server_config.json") || !got.UserFile.Exists {
		t.Errorf("userFile %+v", got.UserFile)
	}
	text, _, _ := runCLI(t, "servers", "--python", "none")
	for _, want := range []string{"lab (http): https://lab.example/mcp", "headers:     Authorization", "fingerprint: sha256:", "problems:"} {
		if !strings.Contains(text, want) {
			t.Errorf("text output lacks %q:\n%s", want, text)
		}
	}
}

func TestInstallUninstallCLI(t *testing.T) {
	needPython3Jupyter(t)
	s := newAdminSandbox(t)
	before := "{\n  \"ServerApp\": {\n    \"open_browser\": false\n  }\n}\n"
	path := s.write(t, "cfg/jupyter_server_config.json", before, 0o640)
	out, _, err := runCLI(t, "install", "--user", "--bridge", "/opt/mjb/megane-jupyter-bridge")
	if err != nil || !strings.Contains(out, "registered \"megane\" with jupyter-server-proxy in "+path) {
		t.Fatalf("install: %v\n%s", err, out)
	}
	out, _, _ = runCLI(t, "install", "--bridge", "/opt/mjb/megane-jupyter-bridge")
	if !strings.Contains(out, "already registered") {
		t.Errorf("second install: %s", out)
	}
	if _, _, err := runCLI(t, "install", "--user", "--system"); err == nil {
		t.Error("two levels accepted")
	}
	// Under JupyterHub internal SSL: the Hub's address of the user's server.
	out, _, err = runCLI(t, "install", "--bridge", "/opt/mjb/megane-jupyter-bridge", "--jupyter-url", "https://hub.example.org{base_url}")
	if now, _ := os.ReadFile(path); err != nil || !strings.Contains(out, "registered") || !strings.Contains(string(now), `"--jupyter-url=https://hub.example.org{base_url}"`) {
		t.Fatalf("install --jupyter-url: %v %s\n%s", err, out, now)
	}
	if _, _, err := runCLI(t, "install", "--jupyter-url", "hub.example.org"); err == nil || !strings.Contains(err.Error(), "give an http or https URL with a host") {
		t.Errorf("install with a URL without a scheme: %v", err)
	}
	out, _, err = runCLI(t, "uninstall", "--user")
	if err != nil || !strings.Contains(out, "removed") {
		t.Fatalf("uninstall: %v %s", err, out)
	}
	if now, _ := os.ReadFile(path); string(now) != before {
		t.Errorf("uninstall left %q, want %q", now, before)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode changed to %v", fi.Mode().Perm())
	}
	s.write(t, "cfg/jupyter_server_config.json", "{broken", 0o644)
	if _, _, err := runCLI(t, "install"); err == nil || !strings.Contains(err.Error(), "is not valid JSON") {
		t.Errorf("install into broken JSON: %v", err)
	}
}

// fakeMCPServer is a minimal stdio MCP server in Python: it answers
// initialize and tools/list with one tool.
const fakeMCPServer = `import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        res = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
               "serverInfo": {"name": "fake-tools", "version": "1.2.3"}}
    elif msg["method"] == "tools/list":
        res = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
    else:
        res = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": res}) + "\n")
    sys.stdout.flush()
`

func TestDoctor(t *testing.T) {
	needPython3Jupyter(t)
	defer goleak.VerifyNone(t)
	t.Run("working", func(t *testing.T) {
		s := newAdminSandbox(t)
		// jupyter-server-proxy is not packaged in Debian: a stand-in
		// package makes it importable for the Python check.
		s.write(t, "pylib/jupyter_server_proxy/__init__.py", "", 0o644)
		t.Setenv("PYTHONPATH", filepath.Join(s.dir, "pylib"))
		s.write(t, "bin/megane-builder-tools", "#!/usr/bin/python3\n"+fakeMCPServer, 0o755)
		s.write(t, "fake.py", fakeMCPServer, 0o644)
		s.write(t, "cfg/jupyter_server_config.json", `{"MeganeBuilderTools": {"mcp_servers": {"fake": {"command": "/usr/bin/python3", "args": ["`+filepath.Join(s.dir, "fake.py")+`"]}}}}`, 0o644)
		if _, _, err := runCLI(t, "install", "--user"); err != nil {
			t.Fatal(err)
		}
		// doctor starts the registered command (this test binary) as
		// jupyter-server-proxy would: it must run as the program.
		t.Setenv(asProgramEnv, "1")
		t.Setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/alice/")
		out, _, err := runCLI(t, "doctor", "--spawn")
		if err != nil {
			t.Fatalf("doctor: %v\n%s", err, out)
		}
		for _, want := range []string{
			"ok:      registered with jupyter-server-proxy as \"megane\"",
			"for base_url /user/alice/ (JUPYTERHUB_SERVICE_PREFIX)",
			"it answers /builder-tools/ws, the path that {base_url}megane/builder-tools/ws reaches it by (absolute_url false)",
			"ok:      server fake (fake-tools 1.2.3): MCP 2025-11-25, initialize ",
			"tools/list ",
			", 1 tools",
			"ok:      server megane-builder-tools (fake-tools 1.2.3)",
			"ok:      no running Jupyter server found",
			"no problems found",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("doctor output lacks %q:\n%s", want, out)
			}
		}
		t.Logf("doctor output:\n%s", out)

		// Under JupyterHub internal SSL the registration needs --jupyter-url.
		// The Hub gives the server (and so the bridge) a certificate and key.
		certFile, keyFile := writeSelfSigned(t, s.dir)
		t.Setenv("JUPYTERHUB_SSL_CERTFILE", certFile)
		t.Setenv("JUPYTERHUB_SSL_KEYFILE", keyFile)
		out, _, err = runCLI(t, "doctor")
		if err == nil || !strings.Contains(out, "error:   JupyterHub internal SSL is on (JUPYTERHUB_SSL_CERTFILE is set) and the registration in ") {
			t.Errorf("doctor under internal SSL without --jupyter-url: %v\n%s", err, out)
		}
		if _, _, err := runCLI(t, "install", "--user", "--jupyter-url", "https://hub.example.org{base_url}"); err != nil {
			t.Fatal(err)
		}
		if out, _, _ = runCLI(t, "doctor"); strings.Contains(out, "internal SSL") || !strings.Contains(out, "ok:      registered with jupyter-server-proxy") {
			t.Errorf("doctor under internal SSL with --jupyter-url:\n%s", out)
		}
	})
	t.Run("a registration whose path is not served", func(t *testing.T) {
		// What the bridge did under JupyterHub before it answered the
		// stripped path: GET / answers, the socket path is 404.
		s := newAdminSandbox(t)
		s.write(t, "pylib/jupyter_server_proxy/__init__.py", "", 0o644)
		t.Setenv("PYTHONPATH", filepath.Join(s.dir, "pylib"))
		t.Setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/alice/")
		s.write(t, "cfg/jupyter_server_config.json", `{"MeganeBuilderTools": {"mcp_servers": {"megane-builder-tools": null}},
			"ServerProxy": {"servers": {"megane": {"command": ["/usr/bin/python3", "-m", "http.server", "--bind", "127.0.0.1", "{port}"], "timeout": 20}}}}`, 0o644)
		out, _, err := runCLI(t, "doctor")
		if err == nil {
			t.Fatalf("doctor succeeded:\n%s", out)
		}
		want := "error:   the registration in " + filepath.Join(s.cfgDir, "jupyter_server_config.json") + " does not serve pages at base_url /user/alice/ (JUPYTERHUB_SERVICE_PREFIX, absolute_url false): it answers /builder-tools/ws with 404 "
		if !strings.Contains(out, want) || strings.Contains(out, "ok:      registered") {
			t.Fatalf("doctor output lacks %q:\n%s", want, out)
		}
	})
	t.Run("broken", func(t *testing.T) {
		s := newAdminSandbox(t)
		s.write(t, "bin/failing", "#!/bin/sh\necho 'starting' >&2\necho 'fatal: license file /opt/x.lic not found' >&2\nexit 3\n", 0o755)
		s.write(t, "cfg/jupyter_server_config.json", `{"MeganeBuilderTools": {"mcp_servers": {"failing": {"command": "failing"}, "megane-builder-tools": null, "insecure": {"url": "http://tools.example.org/mcp"}}}}`, 0o644)
		s.write(t, "cfg/jupyter_server_config.d/megane.json", `{"ServerProxy": {"servers": {"megane": {}}}}`, 0o644)
		out, _, err := runCLI(t, "doctor", "--spawn")
		if err == nil {
			t.Fatalf("doctor succeeded on a broken deployment:\n%s", out)
		}
		for _, want := range []string{
			"error:   jupyter-server-proxy is not installed for /usr/bin/python3",
			"error:   the bridge is not registered with jupyter-server-proxy: run megane-jupyter-bridge install",
			"jupyter_server_config.d/megane.json sets ServerProxy, but Jupyter reads only",
			`server "insecure": url must use https unless the host is loopback`,
			"warning: server failing: does not start: ",
			"failing exited with status 3: fatal: license file /opt/x.lic not found",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("doctor output lacks %q:\n%s", want, out)
			}
		}
		t.Logf("doctor output:\n%s", out)
	})
}

// writeSelfSigned writes a self-signed certificate and its key into dir.
func writeSelfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "jupyterhub-singleuser"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "user.crt"), filepath.Join(dir, "user.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestDoctorSpawnSaysAMissingCommandOnce: doctor --spawn reports a server
// whose command is not on PATH once, with the fix, instead of once for the
// configuration and again for the start it then tried.
func TestDoctorSpawnSaysAMissingCommandOnce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(file, []byte(`{"mcpServers": {"gone": {"command": "uvx-not-installed-here", "args": ["x"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, _ := runCLI(t, "doctor", "--spawn", "--servers", file)
	if n := strings.Count(out, "uvx-not-installed-here"); n != 1 {
		t.Fatalf("doctor --spawn names the missing command %d times, want once:\n%s", n, out)
	}
}
