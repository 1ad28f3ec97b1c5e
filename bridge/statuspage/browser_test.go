package statuspage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the README screenshot (screenshot.png) from the gas_box run")

// chromiumPath is Debian's chromium, installed by .ci/run.
const chromiumPath = "/usr/bin/chromium"

// browserEnv is what the scenarios need: node, playwright-core and chromium.
type browserEnv struct {
	node, playwright string
}

// needBrowser finds node, playwright-core (.ci/node) and chromium. When one
// is missing the test fails under CI=true and is skipped otherwise.
func needBrowser(t *testing.T) browserEnv {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (.ci/run installs it)", msg)
		}
		t.Skipf("skipping the browser tests: %s (run .ci/run, or apt-get install chromium and npm ci --prefix .ci/node)", msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not on PATH")
	}
	pwDir, err := filepath.Abs(filepath.Join("..", "..", ".ci", "node", "node_modules", "playwright-core"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(pwDir, "package.json")); err != nil {
		missing("playwright-core is not installed in .ci/node: %v", err)
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		missing("chromium is not installed: %v", err)
	}
	return browserEnv{node: node, playwright: pwDir}
}

// buildBridge builds the real megane-jupyter-bridge binary into dir.
func buildBridge(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	bin := filepath.Join(dir, "megane-jupyter-bridge")
	cmd := exec.Command(goBin, "build", "-o", bin, "github.com/megane-labs/megane-jupyter-bridge/cmd/megane-jupyter-bridge")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runningBridge is a "serve --standalone" child process.
type runningBridge struct {
	addr, token string
	keyFile     string // the approval signing key
	serversFile string // the --servers file (a scenario may edit it)
	pid         int    // a scenario may stop it (SIGTERM) to see the page say so
	stderr      *bytes.Buffer
}

func (b *runningBridge) pageURL(prefix string) string {
	return "http://" + b.addr + prefix + "?token=" + b.token
}

// startBridge runs bin serve --standalone on a free port with the given
// mcpServers entries, and stops it (SIGTERM, then SIGKILL) when t ends.
func startBridge(t *testing.T, bin string, servers map[string]any) *runningBridge {
	t.Helper()
	dir := t.TempDir()
	cfg, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		t.Fatal(err)
	}
	serversFile := filepath.Join(dir, "servers.json")
	readyFile := filepath.Join(dir, "ready")
	if err := os.WriteFile(serversFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	tokenBytes := make([]byte, 16)
	rand.Read(tokenBytes)
	token := hex.EncodeToString(tokenBytes)
	cmd := exec.Command(bin, "serve", "--standalone", "--port", "0", "--ready-file", readyFile,
		"--token", token, "--servers", serversFile, "--log-level", "debug")
	// Its own HOME and Jupyter data directory: the approval key goes there.
	cmd.Env = append(os.Environ(), "HOME="+dir, "JUPYTER_DATA_DIR="+filepath.Join(dir, "data"), "XDG_DATA_HOME=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("the bridge did not stop within 20 s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("bridge output:\n%s", stderr.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(readyFile); err == nil && strings.HasSuffix(string(b), "\n") {
			return &runningBridge{addr: strings.TrimSpace(string(b)), token: token, stderr: &stderr, pid: cmd.Process.Pid,
				keyFile: filepath.Join(dir, "data", "megane-jupyter-bridge", "receipt.key"), serversFile: serversFile}
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the bridge exited before it was ready: %v\n%s", err, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bridge was not ready within 30 s\n%s", stderr.String())
		}
	}
}

// scenario runs testdata/<name>.js with node and decodes the JSON object it
// prints into out. Screenshots of each scenario go to $STATUSPAGE_SHOTS when
// set (kept for inspection), else to a temporary directory.
func scenario(t *testing.T, env browserEnv, name string, vars map[string]string, out any) {
	t.Helper()
	shots := os.Getenv("STATUSPAGE_SHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	script, err := filepath.Abs(filepath.Join("testdata", name+".js"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, env.node, script)
	cmd.Env = append(os.Environ(), "PLAYWRIGHT_CORE="+env.playwright, "CHROMIUM="+chromiumPath, "SHOTS="+shots)
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	last := lines[len(lines)-1]
	var failure struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal([]byte(last), &failure)
	if runErr != nil || failure.Error != "" {
		t.Fatalf("scenario %s failed: %v\n%s\nstdout:\n%s\nstderr:\n%s", name, runErr, failure.Error, stdout.String(), stderr.String())
	}
	if err := json.Unmarshal([]byte(last), out); err != nil {
		t.Fatalf("scenario %s printed %q: %v", name, last, err)
	}
	t.Logf("scenario %s: screenshots in %s", name, shots)
}

// pageHealth is what every scenario reports about the page itself.
type pageHealth struct {
	ConsoleErrors []string `json:"consoleErrors"`
	PageErrors    []string `json:"pageErrors"`
}

func (h pageHealth) check(t *testing.T) {
	t.Helper()
	if len(h.ConsoleErrors) > 0 || len(h.PageErrors) > 0 {
		t.Errorf("the page logged errors (a script error, or a Content-Security-Policy refusal): console %q, page %q", h.ConsoleErrors, h.PageErrors)
	}
}

// xssPayload is what the hostile test server puts in everything it names.
const xssPayload = `<img src=x onerror="window.__pwned=1">`

// needAxe fails (CI=true) or skips the test when axe-core is not installed
// in .ci/node beside playwright-core.
func needAxe(t *testing.T, env browserEnv) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(filepath.Dir(env.playwright), "axe-core", "axe.min.js")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("axe-core is not installed in .ci/node: %v", err)
		}
		t.Skipf("axe-core is not installed in .ci/node (npm ci --prefix .ci/node): %v", err)
	}
}

// testServers returns the servers the scenarios use: the demo tool server
// (the real binary's demo-tools), a server that fails while starting, a
// well-behaved bridgetest server, a hostile one, and an entry that is a
// configuration problem.
func testServers(t *testing.T, bin string) map[string]any {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tool := func(def map[string]any) json.RawMessage {
		if _, ok := def["inputSchema"]; !ok {
			def["inputSchema"] = map[string]any{"type": "object"}
		}
		b, err := json.Marshal(def)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	hostile := bridgetest.Mode{
		Name: "evil " + xssPayload,
		Tools: []json.RawMessage{
			tool(map[string]any{
				"name": "evil" + xssPayload, "title": "Title " + xssPayload,
				"description": "Description " + xssPayload + " <b>bold</b>",
				"icons":       []map[string]string{{"src": "javascript:window.__pwned=1"}, {"src": "http://127.0.0.1:9/x.png", "mimeType": "image/png"}},
			}),
			tool(map[string]any{"name": "iconic", "description": "A data: icon.", "icons": []map[string]string{{"src": svgIcon, "mimeType": "image/svg+xml"}}}),
			tool(map[string]any{"name": "withdoc", "description": "Pre-fill rules.", "inputSchema": json.RawMessage(withDocSchema)}),
			tool(map[string]any{"name": "badicon", "description": "An icon of a type that is not an image.", "icons": []map[string]string{{"src": "data:text/html,<script>window.__pwned=1</script>"}}}),
		},
	}
	// The megane-reference tools as recorded (tools/list; polymer_chain's
	// call), plus a tool with a widget no contract version defines (§11).
	fixtures := bridgetest.FixtureDir()
	reference := bridgetest.Mode{
		Name:         "megane-builder-tools",
		FixtureList:  filepath.Join(fixtures, "tools-list.json"),
		FixtureCalls: map[string]string{"polymer_chain": filepath.Join(fixtures, "call-polymer_chain.json")},
		Tools: []json.RawMessage{tool(map[string]any{"name": "future_widget", "description": "A widget from a later contract.",
			"inputSchema": json.RawMessage(`{"type": "object", "properties": {"level": {"type": "integer", "minimum": 1, "maximum": 10,
			  "x-megane-widget": "hologram", "title": "Level"},
			  "box": {"type": "array", "items": {"type": "number"}, "minItems": 9, "maxItems": 9, "x-megane-widget": "cell", "title": "Box"}},
			  "required": ["level"]}`)})},
	}
	refJSON := strings.TrimPrefix(reference.Env(), bridgetest.EnvVar+"=")
	modeJSON := strings.TrimPrefix(hostile.Env(), bridgetest.EnvVar+"=")
	plain := strings.TrimPrefix(bridgetest.Mode{Name: "flaky"}.Env(), bridgetest.EnvVar+"=")
	return map[string]any{
		"demo-tools": map[string]any{"command": bin, "args": []string{"demo-tools"}},
		"crashy": map[string]any{"command": "/bin/sh", "args": []string{"-c",
			`echo "loading models (1 of 3)" >&2; sleep 3; echo "fatal: boom" >&2; exit 3`}},
		"flaky":     map[string]any{"command": self, "args": []string{"-test.run=^$"}, "env": map[string]string{bridgetest.EnvVar: plain}},
		"evil":      map[string]any{"command": self, "args": []string{"-test.run=^$"}, "env": map[string]string{bridgetest.EnvVar: modeJSON}},
		"bad":       map[string]any{"url": "http://tools.example.org/mcp"},
		"reference": map[string]any{"command": self, "args": []string{"-test.run=^$"}, "env": map[string]string{bridgetest.EnvVar: refJSON}},
	}
}

// withDocSchema has a document widget (never pre-filled, even with a
// default), a seed widget with a default (a fresh seed wins), a property with
// examples only, and a local $ref with a default.
const withDocSchema = `{"type": "object",
  "properties": {
    "structure": {"type": "object", "x-megane-widget": "document", "default": {"elements": []}},
    "seed": {"type": "integer", "minimum": 0, "x-megane-widget": "seed", "default": 7},
    "n": {"type": "integer", "examples": [5, 6]},
    "mode": {"$ref": "#/$defs/Mode"},
    "free": {"type": "string"}
  },
  "$defs": {"Mode": {"type": "string", "enum": ["a", "b"], "default": "b"}}}`

// svgIcon is a small data: icon (a blue disc).
const svgIcon = "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAxNiAxNiI+PGNpcmNsZSBjeD0iOCIgY3k9IjgiIHI9IjciIGZpbGw9IiMyZjZmZGUiLz48L3N2Zz4="

// jsonString is s as a JSON string, written as JSON.stringify writes it
// (no escaping of <, > and &).
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// TestBrowser drives Debian's chromium through the status page of the real
// bridge binary (serve --standalone) and its demo tool server.
func TestBrowser(t *testing.T) {
	env := needBrowser(t)
	bin := buildBridge(t, t.TempDir())
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	version := regexp.MustCompile(`\d+\.\d+\.\d+\S*`).FindString(string(out))
	if version == "" {
		t.Fatalf("cannot find a version in %q", out)
	}
	servers := testServers(t, bin)
	only := func(names ...string) map[string]any {
		m := map[string]any{}
		for _, n := range names {
			m[n] = servers[n]
		}
		return m
	}

	t.Run("loads", func(t *testing.T) {
		b := startBridge(t, bin, only("demo-tools", "crashy", "bad"))
		type view struct {
			Name, Version, Protocol, User, Socket string
			Servers                               []struct{ Name, State, Text string }
			Problems, Errors, Settings            string
		}
		var res struct {
			First, Second view
			pageHealth
		}
		scenario(t, env, "load", map[string]string{"PAGE_URL": b.pageURL("/megane/builder-tools/"), "PAGE_URL2": b.pageURL("/builder-tools/")}, &res)
		res.check(t)
		for i, v := range []view{res.First, res.Second} {
			if v.Name != "megane-jupyter-bridge" || v.Version != version || v.Protocol != "1" || v.Socket != "connected" {
				t.Errorf("page %d shows name %q version %q protocol %q socket %q; want megane-jupyter-bridge %s, 1, connected", i, v.Name, v.Version, v.Protocol, v.Socket, version)
			}
			if v.User == "" || v.User == "?" {
				t.Errorf("page %d shows no user", i)
			}
			var names []string
			for _, s := range v.Servers {
				names = append(names, s.Name)
				if s.Name == "bad" {
					// An entry that cannot be used is listed with its reason.
					if s.State != "not usable" || !strings.Contains(s.Text, "url must use https") || !strings.Contains(s.Text, "servers.json") {
						t.Errorf("page %d: the bad entry's card says %q:\n%s", i, s.State, s.Text)
					}
					continue
				}
				if s.State != "stopped" {
					t.Errorf("page %d: %s is %q before any connect", i, s.Name, s.State)
				}
			}
			if strings.Join(names, ",") != "crashy,demo-tools,bad" {
				t.Errorf("page %d lists servers %q", i, names)
			}
			for _, s := range v.Servers {
				if s.Name == "demo-tools" {
					for _, want := range []string{bin + " demo-tools", "stdio", "sha256:", "servers.json", "0 tabs, 0 calls in flight"} {
						if !strings.Contains(s.Text, want) {
							t.Errorf("page %d: demo-tools card lacks %q:\n%s", i, want, s.Text)
						}
					}
				}
			}
			if !strings.HasPrefix(v.Settings, "Servers are configured in /") || !strings.Contains(v.Settings, "servers.json") {
				t.Errorf("page %d: settings line %q", i, v.Settings)
			}
			if !strings.Contains(v.Problems, "url must use https") || !strings.Contains(v.Problems, "servers.json") || !strings.Contains(v.Problems, "server bad") {
				t.Errorf("page %d: problems do not name the entry, its file and the reason:\n%s", i, v.Problems)
			}
		}
	})

	t.Run("runtime_problem", func(t *testing.T) {
		b := startBridge(t, bin, only("demo-tools"))
		var res struct {
			Before, Broken, Fixed string
			ConnectButton         bool
			pageHealth
		}
		scenario(t, env, "runtime", map[string]string{"PAGE_URL": b.pageURL("/megane/builder-tools/"), "SERVERS_FILE": b.serversFile}, &res)
		res.check(t)
		if res.Before != "stopped" {
			t.Errorf("demo-tools was %q before the edit", res.Before)
		}
		if !strings.Contains(res.Broken, "url must use https") || !strings.Contains(res.Broken, "servers.json") || res.ConnectButton {
			t.Errorf("after the edit the demo-tools card says (Connect offered: %v):\n%s", res.ConnectButton, res.Broken)
		}
		if strings.Contains(res.Fixed, "url must use https") || strings.Contains(res.Fixed, "not usable") {
			t.Errorf("after the fix the card still shows the problem:\n%s", res.Fixed)
		}
	})

	t.Run("stable_updates", func(t *testing.T) {
		b := startBridge(t, bin, only("demo-tools"))
		var res struct {
			Fingerprint string
			Card        struct {
				FocusKept         bool
				Focused, Selected string
			}
			Args struct{ Value, Focused string }
			pageHealth
		}
		scenario(t, env, "stable", map[string]string{"PAGE_URL": b.pageURL("/megane/builder-tools/")}, &res)
		res.check(t)
		if !res.Card.FocusKept {
			t.Errorf("a server card's focused button lost its focus to a refresh (focus now on %q)", res.Card.Focused)
		}
		if res.Fingerprint == "" || res.Card.Selected != res.Fingerprint {
			t.Errorf("the selected fingerprint %q became %q after refreshes", res.Fingerprint, res.Card.Selected)
		}
		if res.Args.Value != `{"count": 5, "note": "typed while updating"}` || res.Args.Focused != "args" {
			t.Errorf("typing across refreshes: %+v", res.Args)
		}
	})

	t.Run("tool_error_and_stop", func(t *testing.T) {
		b := startBridge(t, bin, only("flaky"))
		var res struct {
			Outcome, Message, Errors string
			Socket, Banner, Pills    string
			pageHealth
		}
		scenario(t, env, "stopped", map[string]string{"PAGE_URL": b.pageURL("/megane/builder-tools/"), "BRIDGE_PID": strconv.Itoa(b.pid)}, &res)
		res.check(t)
		if res.Outcome != "tool-error" || res.Message != "simulated tool error" {
			t.Errorf("a tool error shows as %q: %q", res.Outcome, res.Message)
		}
		if !strings.Contains(res.Errors, "toolerror: simulated tool error") {
			t.Errorf("the tool error is not in Recent errors:\n%s", res.Errors)
		}
		if res.Socket != "bridge stopped" || !strings.Contains(res.Banner, "(1001): the bridge stopped") {
			t.Errorf("after the bridge stopped: socket %q, banner %q", res.Socket, res.Banner)
		}
		if res.Pills != "unknown" {
			t.Errorf("server states after the bridge stopped: %q, want unknown", res.Pills)
		}
	})

	t.Run("confirmation", func(t *testing.T) {
		b := startBridge(t, bin, only("demo-tools"))
		type connectMsg struct {
			ID          json.RawMessage `json:"id"`
			Server      string          `json:"server"`
			Fingerprint string          `json:"fingerprint"`
			Confirmed   *bool           `json:"confirmed"`
			Approval    string          `json:"approval"`
		}
		var res struct {
			DialogText          string
			ConnectsWhileAsking int
			ConnectsAfterCancel int
			First, Second       connectMsg
			FirstReplyOK        bool
			FirstReplyApproval  string
			Stored              string
			DialogsAfterReload  int
			DialogOpen          bool
			Reset               struct {
				Output, Reason, StoredBetween, StoredAfter string
				Confirmed                                  *bool
				ReplyCode                                  string
			}
			pageHealth
		}
		scenario(t, env, "confirm", map[string]string{"PAGE_URL": b.pageURL("/megane/builder-tools/"), "SERVER": "demo-tools",
			"RESET_BIN": bin, "RESET_KEY": b.keyFile}, &res)
		res.check(t)
		if res.ConnectsWhileAsking != 0 || res.ConnectsAfterCancel != 0 {
			t.Errorf("tools:connect sent before confirmation: %d while the dialog was open, %d after Cancel", res.ConnectsWhileAsking, res.ConnectsAfterCancel)
		}
		for _, want := range []string{bin + " demo-tools", "sha256:", "servers.json"} {
			if !strings.Contains(res.DialogText, want) {
				t.Errorf("the confirmation does not show %q:\n%s", want, res.DialogText)
			}
		}
		if res.First.Confirmed == nil || !*res.First.Confirmed || res.First.Approval != "" || !strings.HasPrefix(res.First.Fingerprint, "sha256:") {
			t.Errorf("first connect %+v: want confirmed: true with the fingerprint and no approval", res.First)
		}
		if !res.FirstReplyOK || res.FirstReplyApproval == "" {
			t.Fatalf("first connect's reply: ok %v, approval %q", res.FirstReplyOK, res.FirstReplyApproval)
		}
		if res.Stored != res.FirstReplyApproval {
			t.Errorf("localStorage holds %q for the fingerprint, want the reply's approval", res.Stored)
		}
		if res.DialogsAfterReload != 0 || res.DialogOpen {
			t.Errorf("after a reload the dialog opened %d times (open now: %v)", res.DialogsAfterReload, res.DialogOpen)
		}
		if res.Second.Confirmed != nil || res.Second.Approval != res.FirstReplyApproval || res.Second.Fingerprint != res.First.Fingerprint {
			t.Errorf("connect after reload %+v: want the stored approval and no confirmed", res.Second)
		}
		// approvals reset revokes the receipt: the bridge refuses it, the page
		// forgets it and asks again, saying why, and stores the new one.
		r := res.Reset
		if !strings.Contains(r.Output, "revoked") || r.ReplyCode != "confirmation-required" {
			t.Errorf("after approvals reset (%q) the bridge answered %q, want confirmation-required", r.Output, r.ReplyCode)
		}
		if r.Reason != "The earlier approval is no longer valid." || r.StoredBetween != "" {
			t.Errorf("re-asking: reason %q, stored approval while asking %q", r.Reason, r.StoredBetween)
		}
		if r.Confirmed == nil || !*r.Confirmed || r.StoredAfter == "" || r.StoredAfter == res.FirstReplyApproval {
			t.Errorf("after confirming again: confirmed %v, stored %q (old %q)", r.Confirmed, r.StoredAfter, res.FirstReplyApproval)
		}
	})

	t.Run("gas_box", func(t *testing.T) {
		b := startBridge(t, bin, only("demo-tools", "crashy", "bad"))
		const count = 250
		shot := filepath.Join(t.TempDir(), "screenshot.png")
		if *updateScreenshot {
			shot, _ = filepath.Abs("screenshot.png")
		}
		var res struct {
			Prefilled      map[string]any
			NewSeedVisible bool
			Reseeded       map[string]any
			ToolOptions    []struct {
				Label   string
				Options []string
			}
			CallSent struct {
				Arguments map[string]any `json:"arguments"`
			}
			Seen []struct {
				Value, Max float64
				Message    string
				Visible    bool
			}
			ProgressFrames int
			ModuleLoads    []string
			Result         struct {
				Outcome, Text, Legend    string
				Summary                  map[string]string
				FigureVisible            bool
				CanvasColours            int
				StatusHidden, RunEnabled bool
			}
			pageHealth
		}
		scenario(t, env, "run", map[string]string{"PAGE_URL": b.pageURL("/megane/builder-tools/"), "COUNT": strconv.Itoa(count), "SCREENSHOT": shot}, &res)
		res.check(t)

		// Pre-filled from defaults and first examples, with a fresh seed.
		p := res.Prefilled
		if p["element"] != 18.0 || p["count"] != 100.0 || p["density"] != 0.1 || p["minDistance"] != 0.0 || p["delayMs"] != 0.0 {
			t.Errorf("pre-filled arguments %v: want element 18 and count 100 (examples), density 0.1, minDistance 0, delayMs 0 (defaults)", p)
		}
		if _, ok := p["box"]; ok {
			t.Errorf("pre-filled a box length, which has neither default nor example: %v", p)
		}
		seed, ok := p["seed"].(float64)
		if !ok || seed < 0 || seed != float64(int64(seed)) {
			t.Errorf("seed %v: want a non-negative integer", p["seed"])
		}
		if !res.NewSeedVisible || res.Reseeded["seed"] == p["seed"] {
			t.Errorf("New seed: visible %v, seed %v then %v", res.NewSeedVisible, p["seed"], res.Reseeded["seed"])
		}
		if len(res.ToolOptions) != 1 || res.ToolOptions[0].Label != "Builder: bulk" || len(res.ToolOptions[0].Options) != 2 {
			t.Errorf("tool list %+v: want the two demo tools under Builder: bulk", res.ToolOptions)
		}
		if res.CallSent.Arguments["count"] != float64(count) || res.CallSent.Arguments["seed"] != 12345.0 {
			t.Errorf("tools:call arguments %v", res.CallSent.Arguments)
		}

		// The runner's calls go through the client module, loaded with the token.
		if len(res.ModuleLoads) != 1 || !strings.HasSuffix(res.ModuleLoads[0], "/megane/builder-tools/builder-tools-client.js?token="+b.token) {
			t.Errorf("the page loaded the client module from %q, want once, beside the page, with the token", res.ModuleLoads)
		}

		// Progress was shown: the bar moved under the server's messages.
		if res.ProgressFrames == 0 || len(res.Seen) == 0 {
			t.Fatalf("no progress shown (%d progress frames, %d bar updates)", res.ProgressFrames, len(res.Seen))
		}
		msgRE := regexp.MustCompile(`^placed \d+ of ` + strconv.Itoa(count) + ` atoms$`)
		moved := false
		for _, s := range res.Seen {
			if s.Max != 1 || !s.Visible || !msgRE.MatchString(s.Message) {
				t.Errorf("progress shown %+v: want the fraction done (max 1) and the server's message", s)
				break
			}
			if s.Value > 0 && s.Value < 1 {
				moved = true
			}
		}
		if !moved {
			t.Errorf("the bar never showed a partial value: %+v", res.Seen)
		}

		// The result summary.
		r := res.Result
		if r.Outcome != "ok" || r.Summary["Atoms"] != strconv.Itoa(count) || r.Summary["Bonds"] != "0" {
			t.Errorf("result %+v: want ok, %d atoms, 0 bonds", r, count)
		}
		if !strings.Contains(r.Text, fmt.Sprintf("(%d atoms)", count)) || !strings.Contains(r.Summary["Cell"], "orthorhombic") {
			t.Errorf("result text %q, cell %q", r.Text, r.Summary["Cell"])
		}
		if r.Summary["Warnings"] != "none" || !strings.Contains(r.Summary["Provenance"], "seed: 12345") || !strings.Contains(r.Summary["Provenance"], "demo-tools: "+version) {
			t.Errorf("warnings %q, provenance %q", r.Summary["Warnings"], r.Summary["Provenance"])
		}
		if !r.FigureVisible || r.CanvasColours < 3 || r.Legend != fmt.Sprintf("Ar × %d", count) {
			t.Errorf("picture: visible %v, %d colours, legend %q", r.FigureVisible, r.CanvasColours, r.Legend)
		}
		if !r.StatusHidden || !r.RunEnabled {
			t.Errorf("after the call: progress hidden %v, Run enabled %v", r.StatusHidden, r.RunEnabled)
		}
		if *updateScreenshot {
			t.Logf("wrote %s", shot)
		}
	})

	t.Run("forms", func(t *testing.T) {
		if _, err := os.Stat(filepath.Join(bridgetest.FixtureDir(), "tools-list.json")); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the megane-reference fixtures are missing: %v", err)
			}
			t.Skipf("the megane-reference fixtures are missing: %v", err)
		}
		needAxe(t, env)
		b := startBridge(t, bin, only("demo-tools", "reference"))
		var res struct {
			AdvancedOpen, AdvancedOpenAtEnd               bool
			GasLabels                                     []string
			ElementShown, ElementOther, DensityUnit       string
			CountError, CountInvalid, FocusedAfterError   string
			SentWhileInvalid                              int
			CountErrorAfterFix                            bool
			GasOutcome, GasAtoms, CrystalOutcome          string
			GasArgs, CrystalArgs, PolymerArgs, LiquidArgs map[string]any
			MonomerName, MonomerSmiles                    string
			RequiredMarks                                 []string
			HeadPlain                                     bool
			NameError                                     string
			HeadOptions                                   []string
			PolymerOutcome, PolymerAtoms, LiquidOutcome   string
			RowsBefore                                    int
			DocumentError, SolvateOutcome                 string
			SolvateDocumentAtoms                          int
			UnknownControl, UnknownError, UnknownOutcome  string
			UnknownArgs                                   map[string]any
			AxeLiquid, AxePolymer                         []string
			Solvent                                       map[string]any
			pageHealth
		}
		scenario(t, env, "form", map[string]string{"PAGE_URL": b.pageURL("/megane/builder-tools/")}, &res)
		res.check(t)
		for name, v := range map[string][]string{"polymer_chain's form": res.AxePolymer, "liquid_box's form": res.AxeLiquid} {
			if len(v) > 0 {
				t.Errorf("axe-core: serious or critical violations in %s:\n%s", name, strings.Join(v, "\n"))
			}
		}
		if res.AdvancedOpen || res.AdvancedOpenAtEnd {
			t.Errorf("the raw JSON editor was opened (%v, %v): every tool must run from the form alone", res.AdvancedOpen, res.AdvancedOpenAtEnd)
		}
		if strings.Join(res.GasLabels, "|") != "Element *|Atoms *|Density|Box length (optional)|Minimum distance|Seed *|Extra run time (ms)" {
			t.Errorf("gas_box labels (required marks, optional without default): %q", res.GasLabels)
		}
		if res.ElementShown != "Ar" || res.ElementOther != "Ar, Z = 18" || res.DensityUnit != "g/cm³" {
			t.Errorf("element shown %q (%q), density unit %q", res.ElementShown, res.ElementOther, res.DensityUnit)
		}
		if res.CountError != "Must be at least 1." || res.CountInvalid != "true" || res.FocusedAfterError != `["count"]` || res.SentWhileInvalid != 0 {
			t.Errorf("count 0: message %q, aria-invalid %q, focus on %q, %d calls sent", res.CountError, res.CountInvalid, res.FocusedAfterError, res.SentWhileInvalid)
		}
		if res.CountErrorAfterFix {
			t.Error("the count's message stayed after it was corrected")
		}
		if res.GasOutcome != "ok" || res.GasArgs["element"] != 10.0 || res.GasArgs["count"] != 40.0 || res.GasAtoms != "40" {
			t.Errorf("gas_box from the form: %q, arguments %v, %q atoms", res.GasOutcome, res.GasArgs, res.GasAtoms)
		}
		if res.CrystalOutcome != "ok" || res.CrystalArgs["lattice"] != "bcc" || fmt.Sprint(res.CrystalArgs["repeats"]) != "[3 3 1]" || res.CrystalArgs["a"] != 3.615 {
			t.Errorf("crystal from the form: %q, arguments %v", res.CrystalOutcome, res.CrystalArgs)
		}
		if res.MonomerName != "ethylene" || res.MonomerSmiles != "CC" || res.HeadPlain {
			t.Errorf("polymer_chain's monomer pre-filled %q %q; head a list before a mol block: %v", res.MonomerName, res.MonomerSmiles, res.HeadPlain)
		}
		if strings.Join(res.RequiredMarks, ",") != "monomer,head,tail,seed" {
			t.Errorf("required marks on %q", res.RequiredMarks)
		}
		if res.NameError != "Give the molecule a name." {
			t.Errorf("a monomer without a name: %q", res.NameError)
		}
		if strings.Join(res.HeadOptions, ",") != "0: C,1: C,2: H" {
			t.Errorf("head atom choices %q", res.HeadOptions)
		}
		mono, _ := res.PolymerArgs["monomer"].(map[string]any)
		if res.PolymerOutcome != "ok" || res.PolymerAtoms != "62" || mono["name"] != "ethane" || !strings.Contains(fmt.Sprint(mono["molblock"]), "V2000") || mono["smiles"] != nil ||
			res.PolymerArgs["head"] != 0.0 || res.PolymerArgs["tail"] != 1.0 || res.PolymerArgs["length"] != 10.0 {
			t.Errorf("polymer_chain from the form: %q, %q atoms, arguments %v", res.PolymerOutcome, res.PolymerAtoms, res.PolymerArgs)
		}
		comps, _ := res.LiquidArgs["components"].([]any)
		if res.RowsBefore != 1 || res.LiquidOutcome != "ok" || len(comps) != 2 || fmt.Sprint(comps) != "[map[count:100 molecule:map[name:water smiles:O]] map[count:20 molecule:map[name:ethanol smiles:CCO]]]" {
			t.Errorf("liquid_box: %d rows at first, outcome %q, components %v", res.RowsBefore, res.LiquidOutcome, comps)
		}
		if res.LiquidArgs["shape"] != "cubic" || fmt.Sprint(res.LiquidArgs["aspect"]) != "[1 1 1]" {
			t.Errorf("liquid_box defaults: %v", res.LiquidArgs)
		}
		if fmt.Sprint(res.Solvent) != "map[name:water smiles:O]" {
			t.Errorf("the water preset sent solvent %v", res.Solvent)
		}
		if res.DocumentError != "Required." || res.SolvateOutcome != "ok" || res.SolvateDocumentAtoms != 62 {
			t.Errorf("solvate: without a document %q; with the last result: %q, %d atoms sent", res.DocumentError, res.SolvateOutcome, res.SolvateDocumentAtoms)
		}
		if !strings.HasPrefix(res.UnknownControl, `<input type="number"`) || res.UnknownError != "Must be at most 10." || res.UnknownOutcome != "ok" || res.UnknownArgs["level"] != 3.0 ||
			fmt.Sprint(res.UnknownArgs["box"]) != "[10 0 0 0 12 0 0 0 14]" {
			t.Errorf("unknown widget: control %s, message %q, outcome %q, arguments %v", res.UnknownControl, res.UnknownError, res.UnknownOutcome, res.UnknownArgs)
		}
	})

	t.Run("history_and_accessibility", func(t *testing.T) {
		needAxe(t, env)
		b := startBridge(t, bin, only("demo-tools", "crashy", "bad"))
		var res struct {
			AxeDialog, AxeAfterRun, AxeAfterReload   []string
			AnnouncedStart, AnnouncedEnd, LiveRegion string
			FirstArgs, HistoryArgs, RerunArgs        map[string]any
			TreeTop, TreeStructure                   []string
			CopiedAtoms                              int
			ShownAtoms                               string
			HistoryAfterReload, HistoryAfterRerun    []string
			RerunWithoutServer, RerunTool            string
			RerunSent                                int
			TurnedByKey, ZoomedByWheel, TurnedByDrag bool
			pageHealth
		}
		scenario(t, env, "history", map[string]string{"PAGE_URL": b.pageURL("/megane/builder-tools/")}, &res)
		res.check(t)
		for name, v := range map[string][]string{"the confirmation dialog": res.AxeDialog, "the page after a run": res.AxeAfterRun, "the page after a reload and a re-run": res.AxeAfterReload} {
			if len(v) > 0 {
				t.Errorf("axe-core: serious or critical violations on %s:\n%s", name, strings.Join(v, "\n"))
			}
		}
		if res.FirstArgs["element"] != 29.0 || res.AnnouncedStart != "Running Crystal." || !strings.HasPrefix(res.AnnouncedEnd, "Crystal finished. Built a") || res.LiveRegion != "status polite" {
			t.Errorf("keyboard run: arguments %v; announced %q then %q (region %q)", res.FirstArgs, res.AnnouncedStart, res.AnnouncedEnd, res.LiveRegion)
		}
		if !res.TurnedByKey || !res.ZoomedByWheel || !res.TurnedByDrag {
			t.Errorf("the picture did not change: arrow key %v, wheel %v, drag %v", res.TurnedByKey, res.ZoomedByWheel, res.TurnedByDrag)
		}
		if strings.Join(res.TreeTop, ",") != "contract,name,structure,warnings,provenance" {
			t.Errorf("the raw result tree's top level: %q", res.TreeTop)
		}
		if len(res.TreeStructure) < 3 || res.TreeStructure[0] != "elements: ["+res.ShownAtoms+"]" {
			t.Errorf("the structure node opens to %q (%s atoms shown)", res.TreeStructure, res.ShownAtoms)
		}
		if strconv.Itoa(res.CopiedAtoms) != res.ShownAtoms {
			t.Errorf("Copy JSON gave %d atoms, the page shows %s", res.CopiedAtoms, res.ShownAtoms)
		}
		if strings.Join(res.HistoryAfterReload, "|") != "demo-tools › crystal ok" || fmt.Sprint(res.HistoryArgs) != fmt.Sprint(res.FirstArgs) {
			t.Errorf("history after a reload %q with arguments %v (sent %v)", res.HistoryAfterReload, res.HistoryArgs, res.FirstArgs)
		}
		if !strings.Contains(res.RerunWithoutServer, "Connect demo-tools first") {
			t.Errorf("Run again before connecting says %q", res.RerunWithoutServer)
		}
		if res.RerunSent != 1 || res.RerunTool != "crystal" || fmt.Sprint(res.RerunArgs) != fmt.Sprint(res.FirstArgs) {
			t.Errorf("Run again sent %d calls: %s %v, want crystal %v", res.RerunSent, res.RerunTool, res.RerunArgs, res.FirstArgs)
		}
		if strings.Join(res.HistoryAfterRerun, "|") != "demo-tools › crystal ok|demo-tools › crystal ok" {
			t.Errorf("history after the re-run: %q", res.HistoryAfterRerun)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		b := startBridge(t, bin, only("demo-tools"))
		type frame struct {
			Type      string          `json:"type"`
			ID        json.RawMessage `json:"id"`
			OK        *bool           `json:"ok"`
			Cancelled *bool           `json:"cancelled"`
			Error     *struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		var res struct {
			CallsDuring, Outcome, Message, AtomsAfter, CountersAfter string
			RunEnabled                                               bool
			ElapsedMs                                                float64
			Call, Cancel, CallReply, CancelReply                     *frame
			pageHealth
		}
		scenario(t, env, "cancel", map[string]string{"PAGE_URL": b.pageURL("/megane/builder-tools/")}, &res)
		res.check(t)
		if !strings.Contains(res.CallsDuring, "1 call in flight") {
			t.Errorf("while running, the card says:\n%s", res.CallsDuring)
		}
		if !regexp.MustCompile(`2 calls, 0 failed; [0-9.]+ (B|KiB) of arguments sent, [0-9.]+ (B|KiB|MiB) of results received`).MatchString(res.CountersAfter) {
			t.Errorf("after a cancelled and a finished call, the card's counters say:\n%s", res.CountersAfter)
		}
		if res.Cancel == nil || res.Call == nil || string(res.Cancel.ID) != string(res.Call.ID) {
			t.Fatalf("tools:cancel %+v for call %+v: want the call's id", res.Cancel, res.Call)
		}
		if res.CallReply == nil || res.CallReply.Error == nil || res.CallReply.Error.Code != "cancelled" {
			t.Errorf("the call's reply %+v: want error cancelled", res.CallReply)
		}
		if res.CancelReply == nil || res.CancelReply.Cancelled == nil || !*res.CancelReply.Cancelled {
			t.Errorf("the cancel's reply %+v: want cancelled: true", res.CancelReply)
		}
		if res.Outcome != "cancelled" || !strings.Contains(res.Message, "Cancelled") || !res.RunEnabled {
			t.Errorf("page after Cancel: outcome %q, message %q, Run enabled %v", res.Outcome, res.Message, res.RunEnabled)
		}
		// The call would have run for a minute; Cancel ended it long before.
		if res.ElapsedMs > 30000 {
			t.Errorf("the call ended %.0f ms after Cancel", res.ElapsedMs)
		}
		if res.AtomsAfter != "7" {
			t.Errorf("the call after the cancel built %q atoms, want 7", res.AtomsAfter)
		}
	})

	t.Run("resume after a cut", func(t *testing.T) {
		b := startBridge(t, bin, only("demo-tools"))
		rl := startRelay(t, b.addr)
		drop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rl.cut() }))
		t.Cleanup(drop.Close)
		var res struct {
			Outcome, Atoms, Error string
			States                []string
			ElapsedMs             float64
			Sockets, CallsSent    int
			Hellos                []struct{ Resume bool }
			pageHealth
		}
		page := "http://" + rl.ln.Addr().String() + "/megane/builder-tools/?token=" + b.token
		scenario(t, env, "resume", map[string]string{"PAGE_URL": page, "DROP": drop.URL}, &res)
		res.check(t)
		if res.Outcome != "ok" || res.Atoms != "42" || res.CallsSent != 1 {
			t.Errorf("after the cut: outcome %q (%s), %q atoms, the call sent %d times; want ok, 42, once", res.Outcome, res.Error, res.Atoms, res.CallsSent)
		}
		if len(res.Hellos) != 2 || res.Hellos[0].Resume || !res.Hellos[1].Resume || res.Sockets != 2 {
			t.Errorf("hellos %+v on %d sockets: want a new page session, then a resume", res.Hellos, res.Sockets)
		}
		if !slices.Contains(res.States, "reconnecting…") || res.States[len(res.States)-1] != "connected (resumed)" {
			t.Errorf("the socket's state went %q: want reconnecting…, then connected (resumed)", res.States)
		}
		t.Logf("the result %0.f ms after the cut; socket states %q", res.ElapsedMs, res.States)
	})

	t.Run("crash", func(t *testing.T) {
		b := startBridge(t, bin, only("crashy", "flaky"))
		var res struct {
			StartingText string
			Failed       struct {
				State, LastError string
				ConnectButton    bool
			}
			StderrPane                                  string
			StderrPaneOpenAfterRefresh                  bool
			Errors, CallOutcome, CallError, ErrorsAfter string
			Closed                                      []struct{ Server, Message string }
			ProgressDuringStart                         []string
			pageHealth
		}
		scenario(t, env, "crash", map[string]string{"PAGE_URL": b.pageURL("/megane/builder-tools/")}, &res)
		res.check(t)
		if !strings.Contains(res.StartingText, "Starting… loading models (1 of 3)") {
			t.Errorf("while starting, the card does not show the latest stderr line:\n%s", res.StartingText)
		}
		if res.Failed.State != "failed" || !strings.Contains(res.Failed.LastError, "exited with status 3") || !strings.Contains(res.Failed.LastError, "fatal: boom") || !res.Failed.ConnectButton {
			t.Errorf("after the crash: %+v", res.Failed)
		}
		if !res.StderrPaneOpenAfterRefresh {
			t.Error("the opened stderr pane closed when the page refreshed")
		}
		if !strings.Contains(res.StderrPane, "loading models (1 of 3)\nfatal: boom") {
			t.Errorf("the failed server's stderr pane shows %q", res.StderrPane)
		}
		if !strings.Contains(res.Errors, "crashy: connect failed: server-failed") || !strings.Contains(res.Errors, "fatal: boom") {
			t.Errorf("recent errors:\n%s", res.Errors)
		}
		if res.CallOutcome != "error" || !strings.Contains(res.CallError, "The server failed") {
			t.Errorf("a call whose server exits: outcome %q, message %q", res.CallOutcome, res.CallError)
		}
		if len(res.Closed) != 1 || res.Closed[0].Server != "flaky" || !strings.Contains(res.ErrorsAfter, "flaky stopped: "+res.Closed[0].Message) {
			t.Errorf("tools:closed %+v; recent errors:\n%s", res.Closed, res.ErrorsAfter)
		}
	})

	t.Run("chunks", func(t *testing.T) {
		b := startBridge(t, bin, only("flaky"))
		var res chunksResult
		scenario(t, env, "chunks", map[string]string{"PAGE_URL": b.pageURL("/megane/builder-tools/")}, &res)
		res.check(t)
	})

	t.Run("markup is text", func(t *testing.T) {
		b := startBridge(t, bin, only("evil"))
		var res struct {
			Tools                                      []struct{ Value, Text string }
			ToolInfo, CardText                         string
			ImgsEvil, ImgsIconic, ImgsBadIcon, ImgsEnd []string
			ErrOutcome, ErrText, Raw                   string
			Pwned, PayloadVisible                      bool
			Prefill                                    map[string]any
			pageHealth
		}
		scenario(t, env, "xss", map[string]string{"PAGE_URL": b.pageURL("/megane/builder-tools/"), "PAYLOAD": xssPayload}, &res)
		res.check(t)
		if len(res.Prefill) != 3 || res.Prefill["n"] != 5.0 || res.Prefill["mode"] != "b" || res.Prefill["seed"] == 7.0 || res.Prefill["seed"] == nil {
			t.Errorf("pre-filled %v: want a fresh seed, n 5 (first example), mode b (default through $ref), no document, nothing for free", res.Prefill)
		}
		if res.Pwned {
			t.Error("the payload's onerror handler ran")
		}
		if len(res.ImgsEvil) != 0 || len(res.ImgsBadIcon) != 0 || len(res.ImgsEnd) != 0 {
			t.Errorf("<img> elements were created: evil tool %q, text/html icon %q, at the end %q", res.ImgsEvil, res.ImgsBadIcon, res.ImgsEnd)
		}
		if len(res.ImgsIconic) != 1 || res.ImgsIconic[0] != svgIcon {
			t.Errorf("the data:image/svg+xml icon was not shown: %q", res.ImgsIconic)
		}
		for _, want := range []string{"Title " + xssPayload, "Description " + xssPayload + " <b>bold</b>", "evil" + xssPayload} {
			if !strings.Contains(res.ToolInfo, want) {
				t.Errorf("tool details do not show %q as text:\n%s", want, res.ToolInfo)
			}
		}
		if !strings.Contains(res.CardText, "evil "+xssPayload+" "+bridgetest.Version) {
			t.Errorf("the server card does not show serverInfo as text:\n%s", res.CardText)
		}
		if res.ErrOutcome != "tool-error" || !strings.Contains(res.ErrText, xssPayload) {
			t.Errorf("tool error: outcome %q, text %q", res.ErrOutcome, res.ErrText)
		}
		if !strings.Contains(res.Raw, jsonString(xssPayload)) {
			t.Errorf("the echoed result is not shown as text: %q", res.Raw)
		}
		if !res.PayloadVisible {
			t.Error("the payload is not visible as text on the page")
		}
	})
}

// chunksResult is what the chunks scenario reports: a 6 MB call sent in
// tools:chunk frames, its echo and a 400000-atom structure received in
// binary frames, streamed.
type chunksResult struct {
	Echo struct {
		Outcome, Error, RawStart string
	}
	SentChunks []struct {
		ID               string
		Seq, Count, Size int
	}
	ReceivedChunks1, ReceivedChunks2 int
	BinaryFrames, BinaryHeads        int
	StreamHeads, StreamEnds          int
	Atoms, Errors                    string
	pageHealth
}

func (res chunksResult) check(t *testing.T) {
	t.Helper()
	res.pageHealth.check(t)
	if len(res.SentChunks) < 2 {
		t.Fatalf("the page sent %d tools:chunk frames for a 6 MB call, want a sequence", len(res.SentChunks))
	}
	for i, c := range res.SentChunks {
		if c.Seq != i || c.Count != len(res.SentChunks) || c.ID != res.SentChunks[0].ID || c.Size != res.SentChunks[0].Size {
			t.Errorf("chunk %d: %+v", i, c)
		}
	}
	if res.Echo.Outcome != "ok" || !strings.HasPrefix(res.Echo.RawStart, "{\n  \"echo\": {\n    \"blob\": \"\U0001F600\U0001F600") {
		t.Errorf("the echoed call: outcome %q, error %q, result starts %q", res.Echo.Outcome, res.Echo.Error, res.Echo.RawStart)
	}
	if res.ReceivedChunks1 < 2 || res.ReceivedChunks2 < 2 {
		t.Errorf("the bridge's replies came in %d and %d chunks; want sequences (they exceed the 8 MiB frame limit)", res.ReceivedChunks1, res.ReceivedChunks2)
	}
	if res.Atoms != "400000" {
		t.Errorf("the chunked structure shows %q atoms, want 400000", res.Atoms)
	}
	// The client module asks for binary frames and streams: each large
	// reply is a head and its data in binary frames, no JSON-escaped text,
	// sent while the tool server writes it, and an end that says it was
	// whole.
	if res.BinaryHeads != 2 || res.BinaryFrames < 4 {
		t.Errorf("%d binary chunk heads and %d binary frames for two large replies: want the binary path", res.BinaryHeads, res.BinaryFrames)
	}
	if res.StreamHeads != 2 || res.StreamEnds != 2 {
		t.Errorf("%d streamed heads and %d whole ends for two large replies: want both streamed", res.StreamHeads, res.StreamEnds)
	}
	if strings.Contains(res.Errors, "chunk") {
		t.Errorf("recent errors mention chunks:\n%s", res.Errors)
	}
}
