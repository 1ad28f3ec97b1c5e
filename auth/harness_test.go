package auth

// The integration harness: real Jupyter servers started as processes, the
// real bridge served with the gate under test, a reverse proxy that behaves like jupyter-server-proxy 4.4, and a
// client that reports what a page would see.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter/jupytertest"
)

// needComponent fails the test under CI=true and skips it otherwise.
func needComponent(t *testing.T, what string, err error) {
	t.Helper()
	jupytertest.Need(t, what, err)
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer = bridgetest.Buffer

// logCapture is a test's captured bridge log plus the secrets that must
// never appear in it; the check runs when the test ends.
type logCapture struct {
	buf     syncBuffer
	mu      sync.Mutex
	secrets []string
	Logger  *slog.Logger
}

func newLogCapture(t *testing.T) *logCapture {
	c := &logCapture{}
	c.Logger = slog.New(NewRedactingHandler(slog.NewTextHandler(&c.buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		logs := c.buf.String()
		for _, s := range c.secrets {
			if s != "" && strings.Contains(logs, s) {
				t.Errorf("a credential (%d bytes, starting %q) appears in the bridge log", len(s), s[:min(4, len(s))])
			}
		}
		if t.Failed() || testing.Verbose() {
			t.Logf("bridge log:\n%s", logs)
		}
	})
	return c
}

// secret registers values that must not appear in the log (a cookie
// header is split into its values).
func (c *logCapture) secret(vals ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range vals {
		for _, part := range strings.Split(v, ";") {
			_, val, ok := strings.Cut(strings.TrimSpace(part), "=")
			if ok && len(val) >= 8 {
				c.secrets = append(c.secrets, val)
			}
		}
		if len(v) >= 8 {
			c.secrets = append(c.secrets, v)
		}
	}
}

// handlerGroup tracks handlers that outlive httptest.Server.Close (hijacked
// WebSockets), so a test can wait for them. Unlike a bare WaitGroup, entering
// after wait has begun is allowed (and refused).
type handlerGroup struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   *sync.Cond // signalled when n drops to 0
}

func (g *handlerGroup) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.n++
	return true
}

func (g *handlerGroup) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.n == 0 && g.idle != nil {
		g.idle.Broadcast()
	}
}

func (g *handlerGroup) wait() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	if g.idle == nil {
		g.idle = sync.NewCond(&g.mu)
	}
	for g.n > 0 {
		g.idle.Wait()
	}
}

// jupyterServer is a Jupyter server the bridge asks for verdicts: a
// jupyter_server process started by startJupyter, or a JupyterHub
// single-user server.
type jupyterServer struct {
	Token   string
	HostHdr string // "127.0.0.1:<port>", the Host a browser sends
	BaseURL string // "http://127.0.0.1:<port>/"
	Parent  *jupyter.Parent
	srv     *jupytertest.Server // nil for a JupyterHub user server
}

// jupyterSpec says how to start a server.
type jupyterSpec struct {
	// Root is "" for the host, or a chroot directory.
	Root string
	// Args are extra jupyter_server arguments.
	Args []string
	// ConfigPy, if set, is written as jupyter_server_config.py.
	ConfigPy string
	// Files are extra files written into the config directory (name →
	// content), which is also on PYTHONPATH.
	Files map[string]string
}

// startJupyter starts jupyter_server (jupytertest.Start) and finds it as
// the bridge does, from its runtime file jpserver-<pid>.json.
func startJupyter(t *testing.T, spec jupyterSpec) *jupyterServer {
	t.Helper()
	files := map[string]string{}
	for name, content := range spec.Files {
		files["config/"+name] = content
	}
	if spec.ConfigPy != "" {
		files["config/jupyter_server_config.py"] = spec.ConfigPy
	}
	srv := jupytertest.Start(t, jupytertest.Spec{Root: spec.Root, Args: spec.Args, Files: files})
	// The server answers once its runtime file is written; the Version
	// call checks that the bridge's own client reaches it.
	p, err := jupyter.FindParent(jupyter.ParentOptions{Getenv: srv.Getenv, PPID: srv.Cmd.Process.Pid})
	if err == nil {
		_, err = p.Version(context.Background())
	}
	if err != nil {
		t.Fatalf("the bridge does not find the started jupyter_server: %v\n%s", err, srv.Out)
	}
	return &jupyterServer{Token: srv.Token, HostHdr: srv.HostHdr, BaseURL: srv.URL, Parent: p, srv: srv}
}

// Stop stops a server started by startJupyter.
func (s *jupyterServer) Stop() { s.srv.Stop() }

// loginCookie logs in to s with its token, as a browser does, and returns
// the Cookie header the browser then sends.
func (s *jupyterServer) loginCookie(t *testing.T) string { return s.srv.LoginCookie(t) }

// closingMessage is tools:closing, the message the bridge sends before
// every close with a code other than 1000 (PROTOCOL.md, "Close codes"):
// jupyter-server-proxy relays messages but not close codes.
type closingMessage struct {
	Type   string `json:"type"`
	Code   int    `json:"code"`
	Reason string `json:"reason"`
}

// newBridgeServer serves the real bridge (bridge.New) with gate, an empty
// catalog and real confirmation receipts, logging to log (which must be
// wrapped with NewRedactingHandler, as serve's newLogger does), at BaseURL
// "/": it answers /megane/builder-tools/ws and /builder-tools/ws. The
// cleanup closes the bridge (its tabs) and waits for every handler,
// refusals included, to return.
func newBridgeServer(t *testing.T, gate bridge.Gate, log *slog.Logger) *httptest.Server {
	key, err := LoadOrCreateKey(filepath.Join(t.TempDir(), "receipt.key"))
	if err != nil {
		t.Fatal(err)
	}
	b := bridge.New(bridge.Options{
		Gate:      gate,
		Catalog:   bridge.StaticCatalog{},
		Logger:    log,
		Approvals: NewReceipts(key, ReceiptOptions{}),
		BaseURL:   "/",
	})
	var wg handlerGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Hijacked sockets outlive httptest.Server.Close: track the
		// handler until the bridge is done with the socket.
		if !wg.enter() {
			http.Error(w, "the test is over", http.StatusServiceUnavailable)
			return
		}
		defer wg.leave()
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { b.Close(); srv.Close(); wg.wait() })
	return srv
}

// seen is what a page observes on one connection attempt.
type seen struct {
	HTTPStatus int    // non-zero when the upgrade was refused
	User       string // set when admitted: the user field of the tools:servers reply
	Closing    *closingMessage
	CloseCode  int // the close code the page saw (1005 none given, 1006 dropped)
}

func (s seen) String() string {
	switch {
	case s.HTTPStatus != 0:
		return fmt.Sprintf("HTTP %d", s.HTTPStatus)
	case s.User != "":
		return fmt.Sprintf("admitted as %q, close %d", s.User, s.CloseCode)
	case s.Closing != nil:
		return fmt.Sprintf("tools:closing %d %q, close %d", s.Closing.Code, s.Closing.Reason, s.CloseCode)
	}
	return fmt.Sprintf("close %d", s.CloseCode)
}

// dial connects like a browser (rawURL is ws://..., host the Host header,
// empty: from the URL, hdr the other headers) and acts like a page: it asks
// tools:servers at once. A reply means the socket was admitted (its user
// field is the Admission's user) and the page then closes normally; a
// refusal arrives as tools:closing and a close frame.
func dial(t *testing.T, rawURL, host string, hdr http.Header) seen {
	t.Helper()
	h := hdr.Clone()
	if h == nil {
		h = http.Header{}
	}
	if host != "" {
		h.Set("Host", host)
	}
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	conn, resp, err := d.Dial(rawURL, h)
	if err != nil {
		if resp != nil {
			return seen{HTTPStatus: resp.StatusCode}
		}
		t.Fatalf("dial %s: %v", RedactURL(rawURL), err)
	}
	defer conn.Close()
	var out seen
	// A refused socket may already be gone: the write error is not the
	// verdict, what is read is.
	_ = conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"tools:servers","id":1}`))
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			switch {
			case errors.As(err, &ce):
				out.CloseCode = ce.Code
			case errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "reset"):
				out.CloseCode = websocket.CloseAbnormalClosure
			default:
				t.Fatalf("read: %v", err)
			}
			return out
		}
		var m struct {
			Type   string `json:"type"`
			ID     any    `json:"id"`
			OK     bool   `json:"ok"`
			User   string `json:"user"`
			Code   int    `json:"code"`
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("bad frame %q", data)
		}
		switch m.Type {
		case "tools:servers":
			if !m.OK || m.User == "" {
				t.Fatalf("tools:servers reply without a user: %s", data)
			}
			out.User = m.User
			conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(5*time.Second))
		case "tools:closing":
			out.Closing = &closingMessage{Type: m.Type, Code: m.Code, Reason: m.Reason}
		default:
			t.Fatalf("unexpected frame %s", data)
		}
	}
}

// newServerProxy is a reverse proxy that behaves like jupyter-server-proxy
// 4.4 for a server registered as "megane" (the Jupyter authentication it
// also does is left out: it answers before the bridge is involved):
//   - {prefix}megane/<path>?<query> reaches the backend as /<path>?<query>;
//   - every request header is forwarded (Cookie, Authorization, Origin, the
//     original Host), without X-Forwarded-* for sockets;
//   - the browser's upgrade is accepted (101, first offered subprotocol)
//     before the backend is contacted; if the backend refuses its upgrade
//     with an HTTP status, the browser's socket is dropped without a close
//     frame (the page sees 1006);
//   - backend messages over 10 MiB end the backend leg;
//   - when the backend closes, the browser's socket is closed with an empty
//     close frame (tornado's close() without a code: the page sees 1005);
//     messages sent before it are relayed.
func newServerProxy(t *testing.T, backend string) *httptest.Server {
	return newServerProxyAt(t, backend, "/megane/")
}

// newServerProxyAt is newServerProxy for a Jupyter server whose base_url is
// not "/": prefix is "{base_url}megane/".
func newServerProxyAt(t *testing.T, backend, prefix string) *httptest.Server {
	be, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	up := websocket.Upgrader{
		CheckOrigin: func(*http.Request) bool { return true },
	}
	var wg handlerGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, prefix)
		if !ok || !websocket.IsWebSocketUpgrade(r) {
			http.NotFound(w, r)
			return
		}
		var proto http.Header
		if offered := websocket.Subprotocols(r); len(offered) > 0 {
			proto = http.Header{"Sec-Websocket-Protocol": {offered[0]}}
		}
		client, err := up.Upgrade(w, r, proto)
		if err != nil {
			return
		}
		if !wg.enter() {
			return
		}
		defer wg.leave()
		defer client.Close()
		target := url.URL{Scheme: "ws", Host: be.Host, Path: "/" + rest, RawQuery: r.URL.RawQuery}
		fwd := http.Header{}
		for k, vs := range r.Header {
			switch http.CanonicalHeaderKey(k) {
			case "Upgrade", "Connection", "Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Extensions",
				"Proxy-Connection", "Keep-Alive", "Transfer-Encoding", "Te", "Trailer", "Proxy-Authorization", "Proxy-Authenticate":
				continue
			}
			fwd[k] = vs
		}
		fwd.Set("Host", r.Host)
		d := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
		backendConn, _, err := d.Dial(target.String(), fwd)
		if err != nil {
			// tornado's open() raised: the connection is dropped.
			client.UnderlyingConn().Close()
			return
		}
		defer backendConn.Close()
		backendConn.SetReadLimit(10 << 20)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				mt, data, err := client.ReadMessage()
				if err != nil {
					backendConn.WriteControl(websocket.CloseMessage, []byte{}, time.Now().Add(time.Second))
					return
				}
				if backendConn.WriteMessage(mt, data) != nil {
					return
				}
			}
		}()
		for {
			mt, data, err := backendConn.ReadMessage()
			if err != nil {
				break
			}
			if client.WriteMessage(mt, data) != nil {
				break
			}
		}
		client.WriteControl(websocket.CloseMessage, []byte{}, time.Now().Add(time.Second))
		client.SetReadDeadline(time.Now().Add(5 * time.Second))
		<-done
	}))
	t.Cleanup(func() { srv.Close(); wg.wait() })
	return srv
}

// wsURL turns an httptest URL into a ws:// URL with path.
func wsURL(httpURL, path string) string {
	return "ws" + strings.TrimPrefix(httpURL, "http") + path
}
