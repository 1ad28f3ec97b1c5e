package bridge_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// TestSlowReadersBoundedInBytes: tabs that ask for large results and stop
// reading are closed with 4408 once their queue passes OutboundBytes, or
// once all queues together pass OutboundTotal (the tab furthest behind
// first); a page that reads goes on getting its large results. Before the
// byte bounds, slow tabs held up to 256 queued messages each, whatever their
// size: 7.1 GiB in the red-team run.
func TestSlowReadersBoundedInBytes(t *testing.T) {
	spec := fakeServer(t, "fake", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{OutboundBytes: 8 << 20, OutboundTotal: 12 << 20, FrameLimit: 1 << 20}, spec)
	const result = 3 << 20
	addr := strings.TrimPrefix(h.srv.URL, "http://")
	type slowTab struct {
		conn net.Conn
		r    *bufio.Reader
	}
	var slow []slowTab
	for i := 0; i < 4; i++ {
		conn := rawDial(t, addr)
		defer conn.Close()
		r := bufio.NewReader(conn)
		b, _ := json.Marshal(map[string]any{"type": "tools:connect", "id": 1, "server": spec.Name, "fingerprint": spec.Fingerprint, "confirmed": true})
		writeMaskedText(t, conn, b)
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, _, payload := readFrame(t, r); !strings.Contains(string(payload), `"ok":true`) {
			t.Fatalf("connect: %.300s", payload)
		}
		// Ask for 8 results of 3 MiB, then read nothing.
		for id := 2; id < 10; id++ {
			b, _ := json.Marshal(map[string]any{"type": "tools:call", "id": id, "server": spec.Name, "tool": "big", "arguments": map[string]any{"bytes": result}})
			writeMaskedText(t, conn, b)
		}
		slow = append(slow, slowTab{conn, r})
	}
	// A page that reads gets every one of its large results meanwhile.
	ctx := testCtx(t, 2*time.Minute)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	for i := 0; i < 6; i++ {
		m, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 10 + i, "server": spec.Name, "tool": "big", "arguments": map[string]any{"bytes": result}})
		if err != nil {
			t.Fatalf("the reading page's call %d: %v (%v)", i, err, p.Err())
		}
		mustOK(t, m)
	}
	// Every slow tab ends with tools:closing 4408 (once it reads again,
	// what was already on the wire comes first), or, if the bridge's write
	// was stuck mid-frame when it gave up on the tab, its connection is cut
	// there (no close frame can follow half a frame). A tab the bridge did
	// not close would hit the read deadline and fail the test.
	cut := 0
	for i, s := range slow {
		// The bound: the bridge closes the tab, with 4408 or by cutting a
		// write stalled past WriteTimeout (30 s); not how fast, which on a
		// busy machine is slower.
		s.conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
		closing := false
		for !closing {
			_, opcode, payload, err := tryReadFrame(s.r)
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
				cut++
				closing = true
				break
			}
			if err != nil {
				t.Fatalf("slow tab %d: %v", i, err)
			}
			if opcode == 8 {
				break
			}
			if strings.HasPrefix(string(payload), `{"code":4408`) || (strings.Contains(string(payload), `"tools:closing"`) && strings.Contains(string(payload), "4408")) {
				closing = true
			}
		}
		if !closing {
			t.Errorf("slow tab %d was not closed with 4408", i)
		}
	}
	t.Logf("abuse: 4 tabs ask for 3 MiB results and stop reading | each closed with 4408, or cut mid-frame (8 MiB per tab, 12 MiB in all); a reading page served | all 4 closed (%d cut mid-frame), 6 of 6 results served", cut)
	if logs := h.logBuf.String(); !strings.Contains(logs, "tab not reading") && !strings.Contains(logs, "outbound memory full") {
		t.Errorf("the closes were not logged:\n%s", logs)
	}
}
