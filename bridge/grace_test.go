package bridge_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/megane-labs/megane-jupyter-bridge/auth"
	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// serverLog records, in virtual time, the handshakes a tool server sees and
// when its sessions end (the client's DELETE).
type serverLog struct {
	mu      sync.Mutex
	inits   []time.Time // guarded by mu
	deletes []time.Time // guarded by mu
}

func (l *serverLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodDelete:
			l.mu.Lock()
			l.deletes = append(l.deletes, time.Now())
			l.mu.Unlock()
		case http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"method":"initialize"`)) || bytes.Contains(body, []byte(`"method":"server/discover"`)) {
				l.mu.Lock()
				l.inits = append(l.inits, time.Now())
				l.mu.Unlock()
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (l *serverLog) counts() (inits, deletes []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.inits...), append([]time.Time(nil), l.deletes...)
}

// TestIdleGraceInVirtualTime: a session no tab holds lives on for exactly
// IdleGrace: a tab that connects again within it gets the same session (no
// new handshake), and the server sees the session end exactly IdleGrace
// after the last tab let go. A Streamable HTTP server (go-sdk's) and the
// page both run on in-memory networks in one synctest bubble.
func TestIdleGraceInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const grace = 5 * time.Second
		ctx := t.Context()

		tools := mcp.NewServer(&mcp.Implementation{Name: "grace", Version: "1"}, nil)
		mcp.AddTool(tools, &mcp.Tool{Name: "echo"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
		var log serverLog
		toolNet := bridgetest.NewPipeNet()
		toolSrv := &http.Server{Handler: log.wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return tools }, nil))}
		go toolSrv.Serve(toolNet)
		defer toolSrv.Close()

		spec := bridge.ServerSpec{Name: "lab", Transport: bridge.TransportHTTP, URL: "http://127.0.0.1/mcp", Source: "test", Fingerprint: "sha256:lab"}
		b := bridge.New(bridge.Options{
			Gate: testGate{}, Catalog: bridge.StaticCatalog{Servers: []bridge.ServerSpec{spec}},
			Approvals: auth.NewReceipts([]byte("0123456789abcdef0123456789abcdef"), auth.ReceiptOptions{}),
			IdleGrace: grace, HTTPTransport: &http.Transport{DialContext: toolNet.DialContext},
		})
		pageNet := bridgetest.NewPipeNet()
		srv := &http.Server{Handler: b}
		go srv.Serve(pageNet)
		defer func() {
			srv.Close()
			b.Close()
		}()
		page, _, err := bridgetest.DialVia(ctx, "ws://127.0.0.1/megane/builder-tools/ws", nil, pageNet.Dial)
		if err != nil {
			t.Fatal(err)
		}
		defer page.Close()

		request := func(id int, typ string) {
			t.Helper()
			m := map[string]any{"type": typ, "id": id, "server": spec.Name}
			if typ == "tools:connect" {
				m["fingerprint"], m["confirmed"] = spec.Fingerprint, true
			}
			r, err := page.Request(ctx, m)
			if err != nil || r.OK == nil || !*r.OK {
				t.Fatalf("%s: %v %v", typ, r, err)
			}
		}
		request(1, "tools:connect")
		request(2, "tools:disconnect")
		time.Sleep(grace - time.Second)
		request(3, "tools:connect") // within the grace: the same session
		request(4, "tools:disconnect")
		released := time.Now()
		time.Sleep(3 * grace)

		inits, deletes := log.counts()
		if len(inits) == 0 || len(inits) > 2 || (len(inits) == 2 && !inits[1].Equal(inits[0])) {
			t.Fatalf("handshakes at %v: a connect within the grace must reuse the session", inits)
		}
		if len(deletes) != 1 || deletes[0].Sub(released) != grace {
			t.Fatalf("the server saw its session end at %v, want once, %v after the last tab let go (%v)", deletes, grace, released)
		}
	})
}
