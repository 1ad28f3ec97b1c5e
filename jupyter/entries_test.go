package jupyter

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/child"
)

func noPython(s *sandbox) Options {
	o := s.opts()
	o.Python = "none"
	return o
}

// TestBadEntriesReportedGoodOnesKept puts every kind of bad entry next to
// a good one and checks that each is reported with its file and name while
// the good one is offered.
func TestBadEntriesReportedGoodOnesKept(t *testing.T) {
	s := newSandbox(t)
	s.exe("good-tool")
	file := s.write("home/.jupyter/jupyter_server_config.json", `{"MeganeBuilderTools": {"mcp_servers": {
		"good": {"command": "good-tool", "args": ["--root", "${workspaceFolder}"], "env": {"A": "${userHome}/x"}, "cwd": "sub"},
		"lab-tools": {"url": "http://tools.example.org/mcp"},
		"remote": {"url": "https://tools.example.org/mcp", "headers": {"Authorization": "Bearer t"}},
		"local-http": {"type": "http", "url": "http://127.0.0.1:8765/mcp"},
		"wrong-types": {"command": 5, "args": "x"},
		"unknown-key": {"command": "good-tool", "autoApprove": []},
		"both": {"command": "a", "url": "https://x"},
		"neither": {"args": []},
		"bad-type": {"type": "sse", "url": "https://x"},
		"type-mismatch": {"type": "http", "command": "good-tool"},
		"missing-cmd": {"command": "no-such-command-xyz"},
		"bad-var": {"command": "good-tool", "args": ["${foo}"]},
		"creds": {"command": "good-tool", "env": {"T": "${env:JUPYTERHUB_API_TOKEN}"}},
		"userinfo": {"url": "https://u:p@example.org/mcp"},
		"not-object": ["x"]
	}}}`)
	cfg, err := Load(context.Background(), noPython(s))
	must(t, err)
	probs := problemsText(cfg.Problems)
	for name, want := range map[string]string{
		"lab-tools":     `server "lab-tools": url must use https unless the host is loopback`,
		"wrong-types":   `server "wrong-types": command must be a string, found a number`,
		"unknown-key":   `server "unknown-key": unknown key "autoApprove"`,
		"both":          `server "both": an entry has either command (stdio) or url (http), not both`,
		"neither":       `server "neither": the entry needs command`,
		"bad-type":      `server "bad-type": type must be "stdio" or "http", found "sse"`,
		"type-mismatch": `server "type-mismatch": type is "http" but the entry has command`,
		"bad-var":       `server "bad-var": unknown variable ${foo}`,
		"creds":         `server "creds": ${env:JUPYTERHUB_API_TOKEN} names a variable the bridge removes`,
		"userinfo":      `server "userinfo": url must not contain a user name or password`,
		"not-object":    `server "not-object": the entry must be an object`,
	} {
		if !strings.Contains(probs, file+": "+want) {
			t.Errorf("%s: no problem %q in\n%s", name, file+": "+want, probs)
		}
		if _, ok := entryByName(cfg, name); ok {
			t.Errorf("%s is offered despite its problem", name)
		}
	}
	good, ok := entryByName(cfg, "good")
	if !ok {
		t.Fatalf("the good entry is missing; problems:\n%s", probs)
	}
	if good.Command != filepath.Join(s.bin, "good-tool") {
		t.Errorf("command = %q, want the resolved path", good.Command)
	}
	if good.Args[1] != s.root || good.Env["A"] != s.home+"/x" || good.Cwd != filepath.Join(s.root, "sub") {
		t.Errorf("substitution: args %q env %q cwd %q", good.Args, good.Env, good.Cwd)
	}
	if good.Source != file || good.Level != LevelUser || !strings.HasPrefix(good.Fingerprint, "sha256:") {
		t.Errorf("source %q level %q fingerprint %q", good.Source, good.Level, good.Fingerprint)
	}
	if len(good.Warnings) != 1 || !strings.Contains(good.Warnings[0], "cwd") {
		t.Errorf("want one warning about the missing cwd, got %q", good.Warnings)
	}
	for _, name := range []string{"remote", "local-http"} {
		if e, ok := entryByName(cfg, name); !ok || e.Transport != bridge.TransportHTTP {
			t.Errorf("%s: not offered as http: %+v", name, e)
		}
	}
	missing, ok := entryByName(cfg, "missing-cmd")
	if !ok || len(missing.Warnings) == 0 || !strings.Contains(missing.Warnings[0], file+`: server "missing-cmd": command "no-such-command-xyz" was not found on PATH`) {
		t.Errorf("missing command: offered %v with warnings %q", ok, missing.Warnings)
	}
	if len(cfg.Files) != 1 || cfg.Files[0].Path != file || !cfg.Files[0].Exists {
		t.Errorf("Files = %+v", cfg.Files)
	}
	if cfg.UserFile.Path != file || !cfg.UserFile.Exists || cfg.UserFile.Relative != "" {
		t.Errorf("UserFile = %+v", cfg.UserFile)
	}
}

func TestUserFileRelativeInsideRoot(t *testing.T) {
	s := newSandbox(t)
	s.vars["JUPYTER_CONFIG_DIR"] = filepath.Join(s.root, ".jupyter")
	cfg, err := Load(context.Background(), noPython(s))
	must(t, err)
	if cfg.UserFile.Relative != ".jupyter/jupyter_server_config.json" || cfg.UserFile.Exists {
		t.Errorf("UserFile = %+v", cfg.UserFile)
	}
}

// TestDefaultServer covers the default server's three states, its
// replacement and hiding.
func TestDefaultServer(t *testing.T) {
	t.Run("on PATH", func(t *testing.T) {
		s := newSandbox(t)
		p := s.exe(DefaultServerName)
		s.exe("uvx")
		cfg, _ := Load(context.Background(), noPython(s))
		e, ok := entryByName(cfg, DefaultServerName)
		if !ok || e.Command != p || len(e.Args) != 0 || len(e.Warnings) != 0 || e.Source != "default" {
			t.Errorf("got %+v", e)
		}
	})
	t.Run("in ~/.local/bin", func(t *testing.T) {
		s := newSandbox(t)
		p := s.write("home/.local/bin/"+DefaultServerName, "#!/bin/sh\n")
		must(t, os.Chmod(p, 0o755))
		cfg, _ := Load(context.Background(), noPython(s))
		if e, _ := entryByName(cfg, DefaultServerName); e.Command != p {
			t.Errorf("got %+v", e)
		}
	})
	t.Run("via uvx", func(t *testing.T) {
		s := newSandbox(t)
		uvx := s.exe("uvx")
		cfg, _ := Load(context.Background(), noPython(s))
		e, _ := entryByName(cfg, DefaultServerName)
		want := uvx + " --from " + DefaultServerSource + " " + DefaultServerName
		if e.CommandLine() != want || len(e.Warnings) != 1 || !strings.Contains(e.Warnings[0], "runs through uvx") {
			t.Errorf("got %q warnings %q, want %q", e.CommandLine(), e.Warnings, want)
		}
	})
	t.Run("neither", func(t *testing.T) {
		s := newSandbox(t)
		s.vars["PATH"] = s.bin
		cfg, _ := Load(context.Background(), noPython(s))
		e, ok := entryByName(cfg, DefaultServerName)
		if !ok || e.Command != "uvx" || len(e.Warnings) != 1 || !strings.Contains(e.Warnings[0], "install uv") {
			t.Errorf("got %+v", e)
		}
	})
	t.Run("replaced", func(t *testing.T) {
		s := newSandbox(t)
		s.exe("uvx")
		file := s.write("home/.jupyter/jupyter_server_config.json", `{"MeganeBuilderTools": {"mcp_servers": {"megane-builder-tools": {"url": "https://tools.example.org/mcp"}}}}`)
		cfg, _ := Load(context.Background(), noPython(s))
		e, _ := entryByName(cfg, DefaultServerName)
		if e.URL != "https://tools.example.org/mcp" || e.Source != file || len(cfg.Servers) != 1 {
			t.Errorf("got %+v", cfg.Servers)
		}
	})
	t.Run("hidden", func(t *testing.T) {
		s := newSandbox(t)
		s.write("home/.jupyter/jupyter_server_config.json", `{"MeganeBuilderTools": {"mcp_servers": {"megane-builder-tools": null}}}`)
		cfg, _ := Load(context.Background(), noPython(s))
		if len(cfg.Servers) != 0 {
			t.Errorf("got %+v", cfg.Servers)
		}
	})
	t.Run("hidden by the admin", func(t *testing.T) {
		s := newSandbox(t)
		s.vars["JUPYTER_CONFIG_PATH"] = filepath.Join(s.dir, "etc")
		s.write("etc/"+AdminFileName, "default_server = false\n")
		cfg, _ := Load(context.Background(), noPython(s))
		if len(cfg.Servers) != 0 {
			t.Errorf("got %+v; problems %s", cfg.Servers, problemsText(cfg.Problems))
		}
	})
}

func TestPyWithoutPythonIsReported(t *testing.T) {
	s := newSandbox(t)
	s.write("home/.jupyter/jupyter_server_config.json", `{"MeganeBuilderTools": {"mcp_servers": {"j": {"url": "https://x.example/mcp"}}}}`)
	py := s.write("home/.local/etc/jupyter/jupyter_server_config.py", "c.MeganeBuilderTools.mcp_servers = {}\n")
	s.write("home/.local/etc/jupyter/jupyter_config.py", "c.ServerApp.ip = 'x'\n")
	cfg, err := Load(context.Background(), noPython(s))
	must(t, err)
	if _, ok := entryByName(cfg, "j"); !ok {
		t.Error("the JSON entry is missing")
	}
	probs := problemsText(cfg.Problems)
	if !strings.Contains(probs, py+": defines MeganeBuilderTools but cannot be evaluated") || strings.Count(probs, "cannot be evaluated") != 1 {
		t.Errorf("problems:\n%s", probs)
	}
}

func TestPyWithRealPython(t *testing.T) {
	needJupyter(t)
	s := newSandbox(t)
	s.write("home/.jupyter/jupyter_server_config.py", "import sys\nprint('noise on stdout')\nc.MeganeBuilderTools.mcp_servers = {'p': {'url': 'https://p.example/mcp', 'headers': {'X': 'y'}}}\nc.ServerProxy.servers = {'other': {'command': ['x']}}\n")
	cfg, err := Load(context.Background(), s.opts())
	must(t, err)
	if e, ok := entryByName(cfg, "p"); !ok || e.Headers["X"] != "y" {
		t.Errorf("entry p: %+v; problems:\n%s", e, problemsText(cfg.Problems))
	}
	if _, ok := cfg.ServerProxy.Servers["other"]; !ok {
		t.Errorf("ServerProxy = %+v", cfg.ServerProxy)
	}
}

func TestAdminSettings(t *testing.T) {
	s := newSandbox(t)
	s.exe("tool")
	s.vars["JUPYTER_CONFIG_PATH"] = filepath.Join(s.dir, "etc")
	s.write("etc/"+AdminFileName, `allow_user_servers = false
strip_env_extra = ["MY_SECRET", "CLOUD_*"]

[limits]
frame_limit = "4MiB"
result_limit = 1048576
memory_limit = "2GiB"
init_timeout = "2m"
call_timeout_max = 600
max_calls_per_tab = 4
outbound_bytes = "300MiB"
outbound_total = "2GiB"
chunk_memory = "128MiB"
inbound_memory = "96MiB"
max_pending_connects = 2
frmae_limit = 3
restart_busy_after_cancel = "90s"
resume_grace = "2m"
max_away = 10
max_away_per_user = 3
away_memory = "50MiB"

[mcp_servers.shipped]
command = "tool"
args = ["--x"]

[mcp_servers.broken]
url = "http://example.org/mcp"
`)
	user := s.write("home/.jupyter/jupyter_server_config.json", `{"MeganeBuilderTools": {"mcp_servers": {"mine": {"command": "tool"}}}}`)
	ignored := s.write("home/.jupyter/"+AdminFileName, "allow_user_servers = true\n")
	cfg, err := Load(context.Background(), noPython(s))
	must(t, err)
	a := cfg.Admin
	if a.FrameLimit != 4<<20 || a.ResultLimit != 1<<20 || a.MemoryLimit != 2<<30 || a.InitTimeout != 2*time.Minute || a.CallTimeoutMax != 10*time.Minute || a.MaxCallsPerTab != 4 || a.AllowUserServers ||
		a.OutboundBytes != 300<<20 || a.OutboundTotal != 2<<30 || a.ChunkMemory != 128<<20 || a.InboundMemory != 96<<20 || a.MaxPendingConnects != 2 || a.RestartBusyAfterCancel != 90*time.Second ||
		a.ResumeGrace != 2*time.Minute || a.MaxAway != 10 || a.MaxAwayPerUser != 3 || a.AwayMemory != 50<<20 {
		t.Errorf("admin = %+v", a)
	}
	if !a.Strips("JUPYTERHUB_API_TOKEN") || !a.Strips("MY_SECRET") || !a.Strips("CLOUD_KEY") || a.Strips("JUPYTERHUB_USER") {
		t.Errorf("strip list %q", a.StripEnv)
	}
	if got := child.Environ([]string{"JUPYTER_TOKEN=x", "PATH=/bin", "CLOUD_A=b"}, a.StripEnv, nil); len(got) != 1 || got[0] != "PATH=/bin" {
		t.Errorf("child.Environ with the admin's strip list = %q", got)
	}
	if reason := cfg.Excluded["mine"]; !strings.Contains(reason, user) || !strings.Contains(reason, "admin") {
		t.Errorf("the excluded user server must be named with its file and why: %q", reason)
	}
	probs := problemsText(cfg.Problems)
	toml := filepath.Join(s.dir, "etc", AdminFileName)
	for _, want := range []string{
		toml + `:16: limits.frmae_limit: unknown key`,
		toml + `:28: server "broken": url must use https`,
		user + ": MeganeBuilderTools.mcp_servers is ignored: the admin allows only servers from env and system configuration",
		ignored + ": ignored: admin settings are read only from the env and system config directories",
	} {
		if !strings.Contains(probs, want) {
			t.Errorf("no problem %q in\n%s", want, probs)
		}
	}
	if e, ok := entryByName(cfg, "shipped"); !ok || e.Level != LevelAdmin || e.Source != toml {
		t.Errorf("shipped: %+v", e)
	}
	if _, ok := entryByName(cfg, "mine"); ok {
		t.Error("a user server is offered although the admin forbids them")
	}
}

// TestDefaultStripList: without an admin file, the Jupyter and Hub
// credentials are stripped and identifying names are kept; and a caller
// that changes the list it got changes nobody else's.
func TestDefaultStripList(t *testing.T) {
	a := DefaultAdmin()
	for _, name := range []string{"JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "JUPYTER_TOKEN", "JPY_COOKIE_SECRET",
		"CONFIGPROXY_AUTH_TOKEN", "MEGANE_JUPYTER_BRIDGE_TOKEN", "JUPYTERHUB_OAUTH_CLIENT_SECRET",
		// Named by no entry, stripped by the rule (issue 28).
		"JUPYTERHUB_OAUTH_ACCESS_TOKEN", "JUPYTER_SERVER_TOKEN", "JUPYTERHUB_NEW_SECRET", "JPY_SESSION_KEY",
		"JUPYTER_SERVER_PASSWORD", "JUPYTERHUB_INTERNAL_SSL_KEY"} {
		if !a.Strips(name) {
			t.Errorf("%s reaches tool servers by default", name)
		}
	}
	for _, name := range []string{"JUPYTERHUB_USER", "JUPYTERHUB_API_URL", "HTTPS_PROXY", "PATH", "HOME",
		"JUPYTERHUB_CLIENT_ID", "JUPYTERHUB_SERVICE_PREFIX", "JUPYTERHUB_OAUTH_SCOPES", "JUPYTER_CONFIG_DIR",
		"JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTERHUB_SERVER_NAME", "AWS_SECRET_ACCESS_KEY"} {
		if a.Strips(name) {
			t.Errorf("%s is stripped by default; tools may need it", name)
		}
	}
	got := DefaultStripEnv()
	for i := range got {
		got[i] = "NOTHING_" + got[i]
	}
	a.StripEnv[0] = "NOTHING"
	if again := DefaultAdmin(); !again.Strips("JUPYTERHUB_API_TOKEN") || !slices.Equal(again.StripEnv, DefaultStripEnv()) {
		t.Errorf("changing a returned list changed the default: %q", again.StripEnv)
	}
	// An admin who replaces the list with strip_env starts from the one
	// CONFIG.md shows: it must name every default.
	doc, err := os.ReadFile("CONFIG.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range DefaultStripEnv() {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("CONFIG.md does not list %s among the variables stripped by default", name)
		}
	}
}

func TestAdminSyntaxError(t *testing.T) {
	s := newSandbox(t)
	s.vars["JUPYTER_CONFIG_PATH"] = filepath.Join(s.dir, "etc")
	toml := s.write("etc/"+AdminFileName, "allow_user_servers = true\n[limits\nframe_limit = 1\n")
	s.write("home/.jupyter/jupyter_server_config.json", `{"MeganeBuilderTools": {"mcp_servers": {"ok": {"url": "https://ok.example/mcp"}}}}`)
	cfg, _ := Load(context.Background(), noPython(s))
	if !strings.Contains(problemsText(cfg.Problems), toml+":2: ") {
		t.Errorf("problems:\n%s", problemsText(cfg.Problems))
	}
	if _, ok := entryByName(cfg, "ok"); !ok {
		t.Error("the good JSON entry is missing")
	}
}

func TestFingerprint(t *testing.T) {
	base := bridge.ServerSpec{Transport: bridge.TransportStdio, Command: "/bin/x", Args: []string{"a", "b"}, Env: map[string]string{"K": "v"}, Cwd: "/w"}
	fp := Fingerprint(base)
	// The documented encoding (CONFIG.md), computed independently.
	if fp != "sha256:"+sha256Hex("20:megane-fingerprint-1,5:stdio,6:/bin/x,1:2,1:a,1:b,1:1,1:K,1:v,2:/w,") {
		t.Errorf("fingerprint %s does not follow the documented encoding", fp)
	}
	variants := []bridge.ServerSpec{
		{Transport: bridge.TransportStdio, Command: "/bin/x", Args: []string{"ab"}, Env: map[string]string{"K": "v"}, Cwd: "/w"},
		{Transport: bridge.TransportStdio, Command: "/bin/x", Args: []string{"a", "b"}, Env: map[string]string{"K": "w"}, Cwd: "/w"},
		{Transport: bridge.TransportStdio, Command: "/bin/x", Args: []string{"a", "b"}, Env: map[string]string{"K": "v"}},
		{Transport: bridge.TransportHTTP, URL: "https://x"},
	}
	for i, v := range variants {
		if Fingerprint(v) == fp {
			t.Errorf("variant %d has the same fingerprint", i)
		}
	}
	h1 := Fingerprint(bridge.ServerSpec{Transport: bridge.TransportHTTP, URL: "https://x", Headers: map[string]string{"A": "1", "b": "2"}})
	h2 := Fingerprint(bridge.ServerSpec{Transport: bridge.TransportHTTP, URL: "https://x", Headers: map[string]string{"a": "1", "B": "2"}})
	if h1 != h2 {
		t.Error("header name case changes the fingerprint")
	}
}

// TestAdminMetricsAndAudit: [metrics] and [audit] reach the settings, and a
// wrong value is reported on its line and ignored, never half-applied.
func TestAdminMetricsAndAudit(t *testing.T) {
	logFile := "/var/log/megane/audit.jsonl"
	if runtime.GOOS == "windows" {
		logFile = `C:\logs\audit.jsonl`
	}
	af, probs := parseAdmin("/etc/jupyter/"+AdminFileName, `[metrics]
public_on_loopback = true

[audit]
file = '`+logFile+`'
max_bytes = "16MiB"
keep = 5
`)
	if len(probs) != 0 {
		t.Fatalf("problems: %v", probs)
	}
	a := mergeAdmin([]*adminFile{af})
	if !a.MetricsPublicOnLoopback || a.AuditFile != filepath.Clean(logFile) || a.AuditMaxBytes != 16<<20 || a.AuditKeep != 5 {
		t.Errorf("settings %+v", a)
	}
	if d := DefaultAdmin(); d.MetricsPublicOnLoopback || d.AuditFile != "" {
		t.Errorf("defaults: public_on_loopback %v, audit file %q; want false and none", d.MetricsPublicOnLoopback, d.AuditFile)
	}
	af, probs = parseAdmin("/etc/jupyter/"+AdminFileName, `[metrics]
public_on_loopback = "yes"
scrape = 1

[audit]
file = "audit.jsonl"
keep = 0
`)
	a = mergeAdmin([]*adminFile{af})
	if a.MetricsPublicOnLoopback || a.AuditFile != "" || a.AuditKeep != 0 {
		t.Errorf("wrong values were applied: %+v", a)
	}
	text := problemsText(probs)
	for _, want := range []string{":2: metrics.public_on_loopback: must be true or false", ":3: metrics.scrape: unknown key",
		":6: audit.file: must be an absolute path", ":7: audit.keep: must be a whole number"} {
		if !strings.Contains(text, want) {
			t.Errorf("no problem %q in:\n%s", want, text)
		}
	}
}

// TestAdminSizesBounded: every size has an upper bound (1 TiB), written as
// a number or with a unit; result_limit = 9223372036854775807 used to pass
// and close every page.
func TestAdminSizesBounded(t *testing.T) {
	for _, tc := range []struct {
		value, want string
	}{
		{"9223372036854775807", "must be from 1 byte to 1 TiB"},
		{"1000000000000000000", "must be from 1 byte to 1 TiB"},
		{"1099511627777", "must be from 1 byte to 1 TiB"},
		{`"1025GiB"`, `"1025GiB" is more than 1 TiB`},
		{`"9223372036854775807"`, "is more than 1 TiB"},
		{"1e18", "must be a size"},
		{"-1", "must be from 1 byte to 1 TiB"},
	} {
		for _, key := range []string{"result_limit", "memory_limit", "outbound_total"} {
			t.Run(key+"="+tc.value, func(t *testing.T) {
				af, probs := parseAdmin("/etc/jupyter/"+AdminFileName, "[limits]\n"+key+" = "+tc.value+"\n")
				if af == nil || !strings.Contains(problemsText(probs), tc.want) {
					t.Fatalf("%s = %s: problems %q, want one saying %q", key, tc.value, problemsText(probs), tc.want)
				}
				if af.a.ResultLimit != 0 || af.a.MemoryLimit != 0 || af.a.OutboundTotal != 0 {
					t.Fatalf("the value was taken: %+v", af.a)
				}
			})
		}
	}
}

// TestServersFileReadsAdminPolicy: serve --standalone --servers FILE (make
// run) reads megane_jupyter_bridge.toml from the same env and system config
// directories as a bridge under Jupyter: its limits apply, and one at user
// level is reported, not read. Its [mcp_servers] are not added: the file is
// the whole list. Before, the policy file was ignored in this mode.
func TestServersFileReadsAdminPolicy(t *testing.T) {
	s := newSandbox(t)
	s.exe("tool")
	s.vars["JUPYTER_CONFIG_PATH"] = filepath.Join(s.dir, "etc")
	admin := s.write("etc/"+AdminFileName, "[limits]\nresult_limit = \"1MiB\"\n\n[mcp_servers.shipped]\ncommand = \"tool\"\n")
	user := s.write("home/.jupyter/"+AdminFileName, "[limits]\nresult_limit = \"2MiB\"\n")
	file := s.write("servers.json", `{"mcpServers": {"mine": {"command": "tool"}}}`)
	cfg, err := LoadServersFile(file, noPython(s))
	must(t, err)
	if cfg.Admin.ResultLimit != 1<<20 {
		t.Errorf("result_limit from %s = %d, want 1 MiB", admin, cfg.Admin.ResultLimit)
	}
	if len(cfg.Servers) != 1 || cfg.Servers[0].Name != "mine" {
		t.Errorf("servers %+v, want only the file's", cfg.Servers)
	}
	if probs := problemsText(cfg.Problems); !strings.Contains(probs, user+": ignored") {
		t.Errorf("the user-level policy file is not reported:\n%s", probs)
	}
}

// TestResumeGraceSetting: resume_grace takes a duration from 10 s to 24 h,
// or "off"; anything else is a problem naming what it may be.
func TestResumeGraceSetting(t *testing.T) {
	for _, c := range []struct {
		v    any
		want time.Duration
		err  string
	}{
		{"off", -1, ""},
		{"30s", 30 * time.Second, ""},
		{int64(600), 10 * time.Minute, ""},
		{"5s", 0, "from 10s to 24h"},
		{"48h", 0, "from 10s to 24h"},
		{"soon", 0, "or \"off\""},
	} {
		var af adminFile
		err := af.setLimit("resume_grace", c.v)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("resume_grace = %v: %v, want an error with %q", c.v, err, c.err)
			}
			continue
		}
		if err != nil || af.a.ResumeGrace != c.want {
			t.Errorf("resume_grace = %v: %v, %v; want %v", c.v, af.a.ResumeGrace, err, c.want)
		}
	}
}
