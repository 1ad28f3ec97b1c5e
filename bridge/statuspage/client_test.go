package statuspage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// needNode22 finds Node >= 22 (global WebSocket) from the npm package
// "node" in .ci/node. When it is missing the test fails under CI=true and is
// skipped otherwise.
func needNode22(t *testing.T) string {
	t.Helper()
	node, err := filepath.Abs(filepath.Join("..", "..", ".ci", "node", "node_modules", "node", "bin", "node"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(node, "--version").Output()
	major := 0
	if m := regexp.MustCompile(`^v(\d+)\.`).FindSubmatch(out); m != nil {
		major, _ = strconv.Atoi(string(m[1]))
	}
	if err != nil || major < 22 {
		msg := fmt.Sprintf("Node >= 22 is not installed in .ci/node (%s: %v %q)", node, err, out)
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s: run npm ci --prefix .ci/node", msg)
		}
		t.Skipf("skipping the client module's Node test: %s (npm ci --prefix .ci/node installs it)", msg)
	}
	return node
}

// relay is a TCP relay to addr whose connections the test can cut, as a
// network failure or a restarting proxy would.
type relay struct {
	ln    net.Listener
	addr  string
	mu    sync.Mutex
	conns []net.Conn
}

func startRelay(t *testing.T, addr string) *relay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, addr: addr}
	t.Cleanup(func() { ln.Close(); r.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, c, up)
			r.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return r
}

func (r *relay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

// fakeBridge answers /closing/<code> with tools:closing and that close code
// at once, and /midcall like a bridge with one server "fake" until a
// tools:call, which it answers with tools:closing 4408.
func fakeBridge(t *testing.T) *httptest.Server {
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		closeWith := func(code int, reason string) {
			ws.WriteJSON(map[string]any{"type": "tools:closing", "code": code, "reason": reason})
			ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason))
			ws.SetReadDeadline(time.Now().Add(5 * time.Second))
			for {
				if _, _, err := ws.ReadMessage(); err != nil {
					return
				}
			}
		}
		if c, ok := strings.CutPrefix(r.URL.Path, "/closing/"); ok {
			code, _ := strconv.Atoi(c)
			closeWith(code, "fake reason "+c)
			return
		}
		entry := map[string]any{"name": "fake", "transport": "stdio", "commandLine": "fake", "fingerprint": "sha256:fake", "state": "stopped"}
		lost := r.URL.Path == "/lost"
		for {
			var m map[string]any
			if err := ws.ReadJSON(&m); err != nil {
				return
			}
			switch m["type"] {
			case "tools:hello":
				switch {
				case !lost: // a bridge older than tools:hello
					ws.WriteJSON(map[string]any{"type": m["type"], "id": m["id"], "ok": false, "error": map[string]any{"code": "unknown-type", "message": "unknown message type"}})
				case m["resume"] != nil: // the bridge restarted: it knows no session
					ws.WriteJSON(map[string]any{"type": m["type"], "id": m["id"], "ok": false, "error": map[string]any{"code": "session-unknown", "message": "this page session cannot be resumed: it has ended"}})
				default:
					ws.WriteJSON(map[string]any{"type": m["type"], "id": m["id"], "ok": true, "protocol": 1, "features": []string{"resume"}, "session": map[string]any{"token": "ps_fake", "graceMs": 300000}})
				}
			case "tools:ack":
			case "tools:servers":
				ws.WriteJSON(map[string]any{"type": m["type"], "id": m["id"], "ok": true, "bridge": map[string]any{"name": "fake", "protocol": 1, "query": r.URL.RawQuery}, "servers": []any{entry}, "problems": []any{}})
			case "tools:connect":
				ws.WriteJSON(map[string]any{"type": m["type"], "id": m["id"], "ok": true, "approval": "x", "serverInfo": map[string]any{"name": "fake"}, "tools": []any{map[string]any{"name": "anything"}}})
			case "tools:call":
				if lost {
					ws.UnderlyingConn().Close() // a drop, no close frame
					return
				}
				closeWith(4408, "the page stopped reading")
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

type outcome struct {
	OK      bool            `json:"ok"`
	Result  json.RawMessage `json:"result"`
	Summary *string         `json:"summary"`
	Error   string          `json:"error"`
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

type status struct {
	Open                  bool
	Code                  int
	Message               string
	Reconnecting, Resumed bool
}

type bridgeErr struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	CloseCode int    `json:"closeCode"`
}

// TestClientModuleNode runs builder-tools-client.js, as the bridge serves
// it, in Node against the real bridge binary and a bridgetest server: each
// outcome of the Builder's ToolConnection, confirmation and receipts,
// chunks both ways, a dropped socket, and every close code.
func TestClientModuleNode(t *testing.T) {
	node := needNode22(t)
	bin := buildBridge(t, t.TempDir())
	servers := testServers(t, bin)
	b := startBridge(t, bin, map[string]any{"flaky": servers["flaky"], "demo-tools": servers["demo-tools"]})
	rl := startRelay(t, b.addr)
	drop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rl.cut() }))
	t.Cleanup(drop.Close)
	fake := fakeBridge(t)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	script, _ := filepath.Abs(filepath.Join("testdata", "client-node.mjs"))
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "BRIDGE_HTTP=http://"+b.addr, "TOKEN="+b.token,
		"RELAY_WS=ws://"+rl.ln.Addr().String()+"/megane/builder-tools/ws", "DROP="+drop.URL,
		"FAKE_WS=ws"+strings.TrimPrefix(fake.URL, "http"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res struct {
		Error  string
		Served struct {
			Status int
			Type   string
		}
		ServedOther struct {
			Status int
			Same   bool
		}
		ServedNoToken                int
		BadToken                     bridgeErr
		Servers                      []struct{ Name, Fingerprint string }
		NoConfirm, Declined, Unknown bridgeErr
		ApprovalsAfterDecline        int
		AskedFirst                   []struct{ Name, Fingerprint, CommandLine string }
		Conn                         struct {
			ServerName    string
			ServerVersion *string
			Listing       []string
		}
		Echo, ToolError, Slow, Cancel, AfterCancel, Timeout outcome
		ToolErrorKind                                       string
		ToolErrorKeys                                       []string
		PreAborted                                          struct{ Error, Kind string }
		Progress                                            [][2]any
		Big                                                 struct {
			OK         bool
			Error, Tag string
			Summary    *string
			Size       int
		}
		LargeArgs struct {
			OK, Same bool
			Error    string
		}
		SecondAsked                                       int
		SecondListing                                     []string
		Parsed, Invalid, AfterConnClose, AfterBridgeClose outcome
		Drop, AfterDrop                                   outcome
		Statuses, ResumedStatuses, LostStatuses           []status
		Resumed, AfterResume, Lost, AfterStream           outcome
		StreamResume                                      struct {
			OK                        bool
			Error, Tag                string
			Size, FramesAtCut, Frames int
			Statuses                  []string
		}
		ResumedProgress int
		AskedTotal      int
		Closing         map[string]bridgeErr
		Midcall         outcome
		CookieOnly      bridgeErr
		AuthenticatedBy string
		Query           map[string]struct{ By, Query string }
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); runErr != nil || err != nil || res.Error != "" {
		t.Fatalf("node %s: %v %v %s\nstdout:\n%s\nstderr:\n%s", script, runErr, err, res.Error, stdout.String(), stderr.String())
	}

	if res.Served.Status != 200 || res.Served.Type != "text/javascript; charset=utf-8" {
		t.Errorf("the bridge serves the module with %d %q", res.Served.Status, res.Served.Type)
	}
	if !res.ServedOther.Same || res.ServedOther.Status != 200 || res.ServedNoToken != 403 {
		t.Errorf("at /builder-tools/: %+v; without the token: %d, want 403", res.ServedOther, res.ServedNoToken)
	}
	if res.BadToken.CloseCode != 4401 || !strings.Contains(res.BadToken.Message, "no usable credentials") {
		t.Errorf("a wrong token: %+v, want 4401 explained", res.BadToken)
	}
	if len(res.Servers) != 2 || !strings.HasPrefix(res.Servers[0].Fingerprint, "sha256:") {
		t.Errorf("servers() %+v", res.Servers)
	}
	if res.NoConfirm.Code != "confirmation-required" || res.Declined.Code != "declined" || res.ApprovalsAfterDecline != 0 {
		t.Errorf("without confirm: %+v; declined: %+v; receipts kept after declining: %d", res.NoConfirm, res.Declined, res.ApprovalsAfterDecline)
	}
	if res.Unknown.Code != "unknown-server" || !strings.Contains(res.Unknown.Message, "nonesuch") {
		t.Errorf("an unknown server: %+v", res.Unknown)
	}
	if len(res.AskedFirst) != 1 || res.AskedFirst[0].Name != "flaky" || !strings.HasPrefix(res.AskedFirst[0].Fingerprint, "sha256:") || res.AskedFirst[0].CommandLine == "" {
		t.Errorf("confirm was asked %+v, want once with the fingerprint and command line", res.AskedFirst)
	}
	if res.Conn.ServerName != "flaky" || res.Conn.ServerVersion == nil || *res.Conn.ServerVersion != "1.0.0" || !strings.Contains(strings.Join(res.Conn.Listing, ","), "echo,slow,big") {
		t.Errorf("connection %+v", res.Conn)
	}
	if !res.Echo.OK || string(res.Echo.Result) != `{"echo":{"a":1}}` || res.Echo.Summary == nil || !strings.HasPrefix(*res.Echo.Summary, "echo ") {
		t.Errorf("echo: %+v (result %s)", res.Echo, res.Echo.Result)
	}
	if res.ToolError.OK || res.ToolError.Error != "simulated tool error x" || res.ToolErrorKind != "tool-error" || strings.Join(res.ToolErrorKeys, ",") != "ok,error" {
		t.Errorf("a tool error: %+v (kind %q, keys %q: want the Builder's shape, kind readable but not enumerable)", res.ToolError, res.ToolErrorKind, res.ToolErrorKeys)
	}
	// Progress still queued for the page is replaced by the next (issue
	// 28), so a loaded machine may skip a step; what arrives is in order
	// and ends with the last step before the result.
	all := []string{"[0.3333333333333333 p step 1]", "[0.6666666666666666 p step 2]", "[1 p step 3]"}
	var got []string
	for _, p := range res.Progress {
		got = append(got, fmt.Sprint(p))
	}
	inOrder := len(got) > 0 && got[len(got)-1] == all[2]
	for i, j := 0, 0; inOrder && i < len(got); i++ {
		for j < len(all) && all[j] != got[i] {
			j++
		}
		inOrder = j < len(all)
		j++
	}
	if !res.Slow.OK || !inOrder {
		t.Errorf("progress %v (want steps of %v in order, ending with the last), outcome %+v", res.Progress, all, res.Slow)
	}
	if res.Cancel.OK || res.Cancel.Error != "Cancelled." || !res.AfterCancel.OK {
		t.Errorf("cancel: %+v, then %+v", res.Cancel, res.AfterCancel)
	}
	if res.PreAborted.Error != "Cancelled." || res.PreAborted.Kind != "cancelled" {
		t.Errorf("a call with an aborted signal: %+v", res.PreAborted)
	}
	if res.Timeout.OK || !strings.HasPrefix(res.Timeout.Error, "The server failed: the call timed out") {
		t.Errorf("timeout: %+v", res.Timeout)
	}
	if !res.Big.OK || res.Big.Tag != "B" || res.Big.Size < 12<<20-4096 || res.Big.Summary == nil || *res.Big.Summary != "big" {
		t.Errorf("a 12 MiB result (chunked by the bridge): %+v (summary %v)", res.Big, deref(res.Big.Summary))
	}
	if !res.LargeArgs.OK || !res.LargeArgs.Same {
		t.Errorf("6 MiB of arguments (sent as chunks) echoed: %+v", res.LargeArgs)
	}
	if res.SecondAsked != 0 {
		t.Errorf("a second page with the receipt asked confirm %d times", res.SecondAsked)
	}
	if !strings.Contains(strings.Join(res.SecondListing, ","), "echo,slow,big") || !res.Parsed.OK || string(res.Parsed.Result) != `{"z":1}` {
		t.Errorf("with parseTools/parseResult: listing %q, outcome %+v", res.SecondListing, res.Parsed)
	}
	if res.Invalid.OK || res.Invalid.Error != "The tool returned an invalid result: no echo field" {
		t.Errorf("a result parseResult refuses: %+v", res.Invalid)
	}
	if res.AfterConnClose.OK || !strings.Contains(res.AfterConnClose.Error, "closed") || res.AfterBridgeClose.OK || !strings.Contains(res.AfterBridgeClose.Error, "closed") {
		t.Errorf("calls after close(): %+v, after bridge.close(): %+v", res.AfterConnClose, res.AfterBridgeClose)
	}
	if res.Drop.OK || !strings.Contains(res.Drop.Error, "connection to the bridge was lost") || !strings.Contains(res.Drop.Error, "run it again") {
		t.Errorf("a call when the socket drops: %+v", res.Drop)
	}
	if !res.AfterDrop.OK || string(res.AfterDrop.Result) != `{"echo":{"c":3}}` || res.AskedTotal != 1 {
		t.Errorf("the next call after the drop: %+v (confirm asked %d times in all, want 1)", res.AfterDrop, res.AskedTotal)
	}
	if len(res.Statuses) < 3 || res.Statuses[1].Open || res.Statuses[1].Code != 1006 || !res.Statuses[len(res.Statuses)-1].Open {
		t.Errorf("onStatus: %+v, want open, closed 1006, open", res.Statuses)
	}
	// With a page session, the drop loses nothing.
	if sr := res.StreamResume; !sr.OK || sr.Tag != "S" || sr.Size < 39_000_000 || sr.FramesAtCut < 5 || sr.Frames <= sr.FramesAtCut || !slices.Contains(sr.Statuses, "resumed") || !res.AfterStream.OK {
		t.Errorf("a streamed result when the socket of a page session drops: %+v, then %+v", sr, res.AfterStream)
	}
	if !res.Resumed.OK || string(res.Resumed.Result) != `{"cancelIgnored":false,"steps":20,"tag":"R"}` || !res.AfterResume.OK {
		t.Errorf("a call when the socket of a page session drops: %+v, then %+v", res.Resumed, res.AfterResume)
	}
	var seen []string
	for _, s := range res.ResumedStatuses {
		switch {
		case s.Reconnecting:
			seen = append(seen, "reconnecting")
		case s.Resumed:
			seen = append(seen, "resumed")
		case s.Open:
			seen = append(seen, "open")
		default:
			seen = append(seen, "closed")
		}
	}
	if strings.Join(seen, ",") != "open,reconnecting,resumed" {
		t.Errorf("onStatus with a page session: %v (%+v), want open, reconnecting, resumed", seen, res.ResumedStatuses)
	}
	if res.Lost.OK || !strings.Contains(res.Lost.Error, "could not resume: this page session cannot be resumed") || !strings.Contains(res.Lost.Error, "run it again") {
		t.Errorf("a call whose page session is gone: %+v", res.Lost)
	}
	want := map[string]string{"1001": "the bridge stopped", "4400": "binary frame", "4401": "no usable credentials", "4403": "may not run tools",
		"4408": "stopped reading", "4503": "could not ask the Jupyter server"}
	for code, text := range want {
		got := res.Closing[code]
		if strconv.Itoa(got.CloseCode) != code || !strings.Contains(got.Message, text) || !strings.Contains(got.Message, "fake reason "+code) {
			t.Errorf("closing %s: %+v, want it explained (%q) with the bridge's reason", code, got, text)
		}
	}
	// Credentials: the token goes in the URL (which jupyter-server-proxy
	// logs) only when the cookie is refused.
	if res.AuthenticatedBy != "token" || res.CookieOnly.CloseCode != 4401 {
		t.Errorf("standalone: authenticated by %q, want the token after the cookie was refused; auth 'cookie': %+v, want 4401", res.AuthenticatedBy, res.CookieOnly)
	}
	if q := res.Query["auto"]; q.By != "cookie" || q.Query != "" {
		t.Errorf("a bridge that admits the cookie was sent %+v, want no token in the URL", q)
	}
	if q := res.Query["token"]; q.By != "token" || q.Query != "token=page-token" {
		t.Errorf("auth 'token' sent %+v, want the token in the query", q)
	}
	if res.Midcall.OK || !strings.Contains(res.Midcall.Error, "(4408)") || !strings.Contains(res.Midcall.Error, "stopped reading") {
		t.Errorf("a call in flight when the bridge closes with 4408: %+v", res.Midcall)
	}
}
