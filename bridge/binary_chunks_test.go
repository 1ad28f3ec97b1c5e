package bridge_test

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// TestBinaryChunkFrames: a page that says "binary" in tools:hello gets a
// 40 MB result as a chunk head and binary frames of raw bytes (no JSON
// escaping, which jupyter-server-proxy would otherwise re-encode), a page
// that says nothing gets today's text chunks, both at once on one bridge,
// and both reassemble the same bytes.
func TestBinaryChunkFrames(t *testing.T) {
	spec := fakeServer(t, "lab", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{}, spec)
	ctx := testCtx(t, 90*time.Second)
	text := h.page(ctx)
	bin := h.page(ctx)
	hello, err := bin.Request(ctx, map[string]any{"type": "tools:hello", "id": "h", "features": []string{"binary"}})
	if err != nil || !bytes.Contains(hello.Raw, []byte(`"features":["binary"]`)) {
		t.Fatalf("hello: %v %s", err, hello)
	}
	results := make([][]byte, 2)
	var wg sync.WaitGroup
	for i, p := range []*bridgetest.Page{text, bin} {
		connect(t, ctx, p, 1, spec)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": "lab", "tool": "big", "arguments": map[string]any{"bytes": 40_000_000, "tag": "é😀"}})
			if err != nil || r.OK == nil || !*r.OK {
				t.Errorf("page %d: %v %.200s", i, err, r)
				return
			}
			results[i] = r.Fields["result"]
		}()
	}
	wg.Wait()
	if len(results[0]) < 39_000_000 || !bytes.Equal(results[0], results[1]) {
		t.Fatalf("the text page got %d bytes, the binary page %d, not the same", len(results[0]), len(results[1]))
	}
	if n := text.BinaryFrames(); n != 0 {
		t.Errorf("the page that did not ask got %d binary frames", n)
	}
	size, _ := bin.MaxFrame()
	if n := bin.BinaryFrames(); n < 5 || size > 8<<20 {
		t.Errorf("the binary page got %d binary frames, the largest %d bytes: want the 40 MB in frames of at most 8 MiB", n, size)
	}
}
