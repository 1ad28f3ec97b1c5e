package bridge_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
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

// TestRecheckClosesTheTab, in virtual time: a tab whose user loses access
// is closed with the gate's code and reason at the first recheck that
// refuses, exactly refuseAt intervals after it opened, and not before;
// while access holds, the rechecks keep the tab open (answering pings).
func TestRecheckClosesTheTab(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := &recheckGate{interval: time.Minute, refuseAt: 3}
		b := bridge.New(bridge.Options{Gate: gate, Catalog: bridge.StaticCatalog{}})
		ln := bridgetest.NewPipeNet()
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

		opened := time.Now()
		page, _, err := bridgetest.DialVia(t.Context(), "ws://127.0.0.1/megane/builder-tools/ws", nil, ln.Dial)
		if err != nil {
			t.Fatal(err)
		}
		defer page.Close()
		// Virtual time: a tab never closed fails here, after ten minutes
		// that take no real time. The page's read loop answers pings.
		page.Conn.SetReadDeadline(opened.Add(10 * time.Minute))
		<-page.Done()
		if ce := page.CloseError(); ce == nil || ce.Code != bridge.CloseForbidden || ce.Text != "alice may no longer execute kernels" {
			t.Fatalf("the tab ended with %v, want close %d with the gate's reason", page.Err(), bridge.CloseForbidden)
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
