package bridge_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
)

// TestBusyAfterCancel: a server built like the reference one (a
// synchronous tool in a worker behind one lock, 40 ms of CPU per unit of
// length) is cancelled 300 ms into a call of length 100 (4 s of work).
// Where it ignores the cancel, the bridge measures its processes still
// computing: tools:servers says for how long (busyAfterCancelMs), the next
// call's first progress says why it waits, and once the work is done
// both go. Where it stops, neither appears.
func TestBusyAfterCancel(t *testing.T) {
	if !child.CPUMeasured() {
		t.Skip("the CPU time of processes is not measured on this OS (macOS): the bridge cannot tell")
	}
	for _, ignore := range []bool{true, false} {
		name := map[bool]string{true: "keeps computing", false: "stops"}[ignore]
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t, 60*time.Second)
			spec := fakeServer(t, "megane-builder-tools", bridgetest.Mode{
				FixtureList:  fixturePath(t, "tools-list.json"),
				FixtureCalls: map[string]string{"polymer_chain": fixturePath(t, "call-polymer_chain.json")},
				FixtureWork:  &bridgetest.FixtureWork{Arg: "length", MsPerUnit: 40, IgnoreCancel: ignore},
			})
			h := newHarness(t, bridge.Options{}, spec)
			p := h.page(ctx)
			connect(t, ctx, p, 1, spec)
			args := map[string]any{"monomer": map[string]any{"name": "ethylene", "smiles": "CC"}, "head": 0, "tail": 1, "seed": 1, "length": 100}
			if err := p.Send(map[string]any{"type": "tools:call", "id": "long", "server": spec.Name, "tool": "polymer_chain", "arguments": args}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond)
			if err := p.Send(map[string]any{"type": "tools:cancel", "id": "long"}); err != nil {
				t.Fatal(err)
			}
			r, err := p.Reply(ctx, "tools:call", "long")
			if err != nil {
				t.Fatal(err)
			}
			mustErr(t, r, bridge.CodeCancelled)
			time.Sleep(2500 * time.Millisecond) // the grace and one window

			busy := func() int64 {
				t.Helper()
				r, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": "s"})
				if err != nil {
					t.Fatal(err)
				}
				var v struct {
					Servers []struct {
						Name              string `json:"name"`
						BusyAfterCancelMs int64  `json:"busyAfterCancelMs"`
					} `json:"servers"`
				}
				json.Unmarshal(r.Raw, &v)
				for _, s := range v.Servers {
					if s.Name == spec.Name {
						return s.BusyAfterCancelMs
					}
				}
				t.Fatalf("tools:servers lacks %s: %s", spec.Name, r.Raw)
				return 0
			}
			if b := busy(); ignore && b < 1000 || !ignore && b != 0 {
				t.Fatalf("2.8 s after the cancel, busyAfterCancelMs is %d; want at least 1000 when the server ignores it, none when it stops", b)
			}
			args["length"] = 1
			if err := p.Send(map[string]any{"type": "tools:call", "id": "next", "server": spec.Name, "tool": "polymer_chain", "arguments": args}); err != nil {
				t.Fatal(err)
			}
			r, err = p.Reply(ctx, "tools:call", "next")
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, r)
			var note string
			for _, m := range p.All() {
				if m.Type == "tools:progress" && string(m.ID) == `"next"` {
					var pr struct{ Message string }
					json.Unmarshal(m.Raw, &pr)
					note = pr.Message
					break
				}
			}
			const want = "megane-builder-tools is still finishing a cancelled call"
			if ignore != strings.HasPrefix(note, want) {
				t.Fatalf("the next call's first progress is %q; want it to begin %q only when the server ignored the cancel", note, want)
			}
			if ignore {
				deadline := time.Now().Add(10 * time.Second)
				for busy() != 0 {
					if time.Now().After(deadline) {
						t.Fatal("busyAfterCancelMs stayed after the cancelled work was done")
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
		})
	}
}

// TestRestartBusyAfterCancel: with RestartBusyAfterCancel, a server still
// computing that long after a cancel has its session ended: the tab is
// told why (tools:closed), and a new connect gets a fresh server whose
// call does not wait behind the abandoned work.
func TestRestartBusyAfterCancel(t *testing.T) {
	if !child.CPUMeasured() {
		t.Skip("the CPU time of processes is not measured on this OS (macOS): the bridge cannot tell")
	}
	ctx := testCtx(t, 60*time.Second)
	spec := fakeServer(t, "megane-builder-tools", bridgetest.Mode{
		FixtureList:  fixturePath(t, "tools-list.json"),
		FixtureCalls: map[string]string{"polymer_chain": fixturePath(t, "call-polymer_chain.json")},
		FixtureWork:  &bridgetest.FixtureWork{Arg: "length", MsPerUnit: 100, IgnoreCancel: true},
	})
	h := newHarness(t, bridge.Options{RestartBusyAfterCancel: 2 * time.Second}, spec)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	args := map[string]any{"monomer": map[string]any{"name": "ethylene", "smiles": "CC"}, "head": 0, "tail": 1, "seed": 1, "length": 200} // 20 s of work
	if err := p.Send(map[string]any{"type": "tools:call", "id": "long", "server": spec.Name, "tool": "polymer_chain", "arguments": args}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := p.Send(map[string]any{"type": "tools:cancel", "id": "long"}); err != nil {
		t.Fatal(err)
	}
	closed, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:closed" })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(closed.Raw), "restarted: it kept computing a cancelled call for ") {
		t.Fatalf("tools:closed %s: want the reason, restart_busy_after_cancel", closed.Raw)
	}
	connect(t, ctx, p, 2, spec)
	args["length"] = 1
	start := time.Now()
	r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": "next", "server": spec.Name, "tool": "polymer_chain", "arguments": args})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the call on the fresh server took %s: it waited behind the abandoned work", took)
	}
}

// TestBusyAfterCancelNotOtherCalls: a server that stops a cancelled call
// but is busy with another call in flight is not reported as finishing a
// cancelled call: its CPU is that call's.
func TestBusyAfterCancelNotOtherCalls(t *testing.T) {
	if !child.CPUMeasured() {
		t.Skip("the CPU time of processes is not measured on this OS (macOS): the bridge cannot tell")
	}
	ctx := testCtx(t, 60*time.Second)
	spec := fakeServer(t, "megane-builder-tools", bridgetest.Mode{
		FixtureList:  fixturePath(t, "tools-list.json"),
		FixtureCalls: map[string]string{"polymer_chain": fixturePath(t, "call-polymer_chain.json")},
		FixtureWork:  &bridgetest.FixtureWork{Arg: "length", MsPerUnit: 40},
	})
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	args := map[string]any{"monomer": map[string]any{"name": "ethylene", "smiles": "CC"}, "head": 0, "tail": 1, "seed": 1, "length": 100}
	for _, id := range []string{"cancelled", "other"} {
		if err := p.Send(map[string]any{"type": "tools:call", "id": id, "server": spec.Name, "tool": "polymer_chain", "arguments": args}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if err := p.Send(map[string]any{"type": "tools:cancel", "id": "cancelled"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // "other" computes meanwhile
	r, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": "s"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(r.Raw), "busyAfterCancelMs") {
		t.Fatalf("tools:servers reports the server busy after a cancel while another call computes: %s", r.Raw)
	}
	r, err = p.Reply(ctx, "tools:call", "other")
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
}
