package auth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestServerProxyEmulation pins down the jupyter-server-proxy behaviour the
// other tests rely on, against a plain WebSocket backend.
func TestServerProxyEmulation(t *testing.T) {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	var wg handlerGroup
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refuse" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		if !wg.enter() {
			return
		}
		defer wg.leave()
		defer c.Close()
		switch r.URL.Path {
		case "/echo":
			info, _ := json.Marshal(map[string]string{"path": r.URL.Path, "query": r.URL.RawQuery, "host": r.Host,
				"cookie": r.Header.Get("Cookie"), "authorization": r.Header.Get("Authorization"), "origin": r.Header.Get("Origin"),
				"xff": r.Header.Get("X-Forwarded-For")})
			c.WriteMessage(websocket.TextMessage, info)
		case "/big":
			c.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("x", 10<<20)))
			c.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("y", 10<<20+1)))
		}
		c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4403, "closing with a code"), time.Now().Add(time.Second))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		c.ReadMessage()
	}))
	defer func() { backend.Close(); wg.wait() }()
	proxy := newServerProxy(t, backend.URL)

	dialRaw := func(path string, h http.Header) (msgs [][]byte, code int, status int) {
		d := websocket.Dialer{ReadBufferSize: 1 << 16}
		c, resp, err := d.Dial(wsURL(proxy.URL, path), h)
		if err != nil {
			if resp != nil {
				return nil, 0, resp.StatusCode
			}
			t.Fatal(err)
		}
		defer c.Close()
		c.SetReadLimit(64 << 20)
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		for {
			_, m, err := c.ReadMessage()
			if err != nil {
				if ce, ok := err.(*websocket.CloseError); ok {
					return msgs, ce.Code, 0
				}
				return msgs, websocket.CloseAbnormalClosure, 0
			}
			msgs = append(msgs, m)
		}
	}

	t.Run("prefix stripped, query and every header forwarded, close code lost", func(t *testing.T) {
		msgs, code, _ := dialRaw("/megane/echo?token=abc&x=1", hdr("Host", "jupyter.example:8888", "Cookie", "c=1", "Authorization", "token t", "Origin", "http://jupyter.example:8888"))
		if len(msgs) != 1 {
			t.Fatalf("messages %d, close %d", len(msgs), code)
		}
		var got map[string]string
		json.Unmarshal(msgs[0], &got)
		want := map[string]string{"path": "/echo", "query": "token=abc&x=1", "host": "jupyter.example:8888", "cookie": "c=1",
			"authorization": "token t", "origin": "http://jupyter.example:8888", "xff": ""}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: backend saw %q, want %q", k, got[k], v)
			}
		}
		if code != websocket.CloseNoStatusReceived {
			t.Fatalf("the page saw close code %d, want 1005 (jupyter-server-proxy closes without a code)", code)
		}
	})
	t.Run("an HTTP refusal of the backend becomes 101 then a drop", func(t *testing.T) {
		msgs, code, status := dialRaw("/megane/refuse", nil)
		if status != 0 || len(msgs) != 0 || code != websocket.CloseAbnormalClosure {
			t.Fatalf("status %d, %d messages, close %d; want an accepted upgrade and a 1006 drop", status, len(msgs), code)
		}
	})
	t.Run("backend frames are limited to 10 MiB", func(t *testing.T) {
		msgs, _, _ := dialRaw("/megane/big", nil)
		if len(msgs) != 1 || len(msgs[0]) != 10<<20 {
			t.Fatalf("got %d messages; want only the 10 MiB one", len(msgs))
		}
	})
}
