package bridge_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
)

// recheckGate admits everyone, and rechecks every interval: the recheck
// number refuseAt (counted from 1) and every later one refuse with 4403.
type recheckGate struct {
	interval time.Duration
	refuseAt int

	mu    sync.Mutex
	calls int // guarded by mu
}

func (g *recheckGate) Admit(context.Context, *http.Request) (bridge.Admission, *bridge.Refusal) {
	return bridge.Admission{User: "alice", RecheckInterval: g.interval, Recheck: func(context.Context) *bridge.Refusal {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.calls++
		if g.refuseAt > 0 && g.calls >= g.refuseAt {
			return &bridge.Refusal{CloseCode: bridge.CloseForbidden, Reason: "alice may no longer execute kernels"}
		}
		return nil
	}}, nil
}

// pipeListener hands out one end of in-memory connections, so the bridge's
// HTTP server and the page live in one synctest bubble.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}
func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// TestRecheckClosesTheTab, in virtual time: a tab whose user loses access
// is closed with the gate's code and reason at the first recheck that
// refuses, exactly refuseAt intervals after it opened, and not before;
// while access holds, the rechecks keep the tab open (answering pings).
func TestRecheckClosesTheTab(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := &recheckGate{interval: time.Minute, refuseAt: 3}
		b := bridge.New(bridge.Options{Gate: gate, Catalog: bridge.StaticCatalog{}})
		ln := &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
		srv := &http.Server{Handler: b}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		defer func() {
			srv.Close()
			b.Close()
			if err := <-served; !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("serve: %v", err)
			}
		}()

		d := websocket.Dialer{NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			page, bridgeEnd := net.Pipe()
			select {
			case ln.conns <- bridgeEnd:
				return page, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}}
		opened := time.Now()
		ws, _, err := d.DialContext(t.Context(), "ws://127.0.0.1/megane/builder-tools/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		// Virtual time: a tab never closed fails here, after ten minutes
		// that take no real time.
		ws.SetReadDeadline(opened.Add(10 * time.Minute))
		var readErr error
		for readErr == nil {
			_, _, readErr = ws.ReadMessage() // answers the bridge's pings
		}
		var ce *websocket.CloseError
		if !errors.As(readErr, &ce) || ce.Code != bridge.CloseForbidden || ce.Text != "alice may no longer execute kernels" {
			t.Fatalf("the tab ended with %v, want close %d with the gate's reason", readErr, bridge.CloseForbidden)
		}
		if got, want := time.Since(opened), 3*time.Minute; got != want {
			t.Fatalf("closed %v after it opened, want %v (the third recheck)", got, want)
		}
		gate.mu.Lock()
		defer gate.mu.Unlock()
		if gate.calls != 3 {
			t.Fatalf("%d rechecks, want 3", gate.calls)
		}
	})
}
