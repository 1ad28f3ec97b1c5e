package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// plainWSEnv makes this test binary a plain gorilla WebSocket server, the
// baseline of BenchmarkJupyterHop behind the same Jupyter proxies as the
// bridge: it answers every message with the reply around the result of
// the call fixture named by the variable, and takes --port=N as
// jupyter-server-proxy gives it. jupyter-server-proxy refuses messages
// over 10 MiB from its backend, so the reply cannot go as one message: it
// goes as the least a server can send through it, a binary chunk head and
// binary frames of 8 MiB (PROTOCOL.md, Chunks), prepared once.
const plainWSEnv = "MEGANE_TEST_PLAIN_WS"

// plainWS serves the baseline until it is killed; it returns the exit
// status.
func plainWS(fixture string) int {
	fs := flag.NewFlagSet("plainws", flag.ContinueOnError)
	port := fs.Int("port", 0, "")
	fs.String("test.run", "", "")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	raw, err := os.ReadFile(fixture)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var fix struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(raw, &fix); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			var m struct {
				Type string          `json:"type"`
				ID   json.RawMessage `json:"id"`
			}
			if err := ws.ReadJSON(&m); err != nil {
				return
			}
			reply := fmt.Appendf(nil, `{"type":%q,"id":%s,"ok":true,"result":`, m.Type, m.ID)
			reply = append(append(reply, fix.Result...), '}')
			const frame = 8 << 20
			count := (len(reply) + frame - 1) / frame
			head := fmt.Appendf(nil, `{"type":"tools:chunk","id":"g","count":%d,"size":%d,"binary":true}`, count, len(reply))
			if ws.WriteMessage(websocket.TextMessage, head) != nil {
				return
			}
			for p := reply; len(p) > 0; {
				n := min(len(p), frame)
				if ws.WriteMessage(websocket.BinaryMessage, p[:n]) != nil {
					return
				}
				p = p[n:]
			}
		}
	}))
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// withPlainWS adds the baseline server, as "plainws", to the
// jupyter_server_config.json cfg: exe serving fixture.
func withPlainWS(t testing.TB, cfg, exe, fixture string) string {
	t.Helper()
	return withProxyServer(t, cfg, "plainws", map[string]any{
		"command":     []string{exe, "-test.run=^$", "--port={port}"},
		"environment": map[string]string{plainWSEnv: fixture},
		"timeout":     30,
	})
}

// withProxyServer adds to the Jupyter configuration cfg (JSON, with
// ServerProxy.servers) the jupyter-server-proxy server name, registered
// as reg.
func withProxyServer(t testing.TB, cfg, name string, reg any) string {
	t.Helper()
	var c map[string]map[string]map[string]any
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		t.Fatal(err)
	}
	c["ServerProxy"]["servers"][name] = reg
	out, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// plainWSURL is the baseline's socket behind the Jupyter server at
// publicBase.
func plainWSURL(publicBase string) string {
	return "ws" + strings.TrimPrefix(publicBase, "http") + "plainws/ws"
}
