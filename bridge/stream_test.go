package bridge_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// hello sends tools:hello with features and fails unless every one is
// granted.
func hello(t *testing.T, ctx context.Context, p *bridgetest.Page, features ...string) {
	t.Helper()
	r, err := p.Request(ctx, map[string]any{"type": "tools:hello", "id": "h", "features": features})
	if err != nil {
		t.Fatalf("hello: %v", err)
	}
	for _, f := range features {
		if !bytes.Contains(r.Fields["features"], []byte(`"`+f+`"`)) {
			t.Fatalf("hello: %q not granted: %s", f, r)
		}
	}
}

// TestStreamedResult: four pages on one bridge ask for the same 40 MB
// result at once: one with text chunks, one with binary chunks, one that
// streams, one that streams in a page session. Each gets the same bytes;
// the streaming pages get the result's first frame long before its end.
func TestStreamedResult(t *testing.T) {
	spec := fakeServer(t, "lab", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{}, spec)
	ctx := testCtx(t, 120*time.Second)
	kinds := []struct {
		name     string
		features []string
	}{
		{"text", nil},
		{"binary", []string{"binary"}},
		{"stream", []string{"binary", "stream"}},
		{"stream in a page session", []string{"resume", "binary", "stream"}},
	}
	pages := make([]*bridgetest.Page, len(kinds))
	results := make([][]byte, len(kinds))
	starts := make([]time.Time, len(kinds))
	var wg sync.WaitGroup
	for i, k := range kinds {
		p := h.page(ctx)
		pages[i] = p
		if k.features != nil {
			hello(t, ctx, p, k.features...)
		}
		connect(t, ctx, p, 1, spec)
		wg.Add(1)
		go func() {
			defer wg.Done()
			starts[i] = time.Now()
			r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 2, "server": "lab", "tool": "big", "arguments": map[string]any{"bytes": 40_000_000, "tag": "é😀"}})
			if err != nil || r.OK == nil || !*r.OK {
				t.Errorf("%s: %v %.200s", k.name, err, r)
				return
			}
			results[i] = r.Raw
			if k.features != nil && k.features[0] == "resume" {
				p.Send(map[string]any{"type": "tools:ack", "n": 1 << 20})
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	want := results[0]
	if len(want) < 39_000_000 {
		t.Fatalf("the text page got %d bytes", len(want))
	}
	for i, k := range kinds {
		got := results[i]
		if k.features != nil && k.features[0] == "resume" {
			// A page session's message starts with its number, which a
			// streamed one does not have (its frames do).
			if !bytes.HasPrefix(got, []byte(`{"type":`)) && bytes.HasPrefix(got, []byte(`{"n":`)) {
				got = append([]byte{'{'}, got[bytes.IndexByte(got, ',')+1:]...)
			}
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, not the text page's %d", k.name, len(got), len(want))
		}
		streams := pages[i].Streams()
		streaming := strings.HasPrefix(k.name, "stream")
		if streaming != (len(streams) == 1) {
			t.Errorf("%s: %d streamed results", k.name, len(streams))
			continue
		}
		if !streaming {
			continue
		}
		s := streams[0]
		if !s.OK || s.Frames < 10 || s.Bytes != len(want) {
			t.Errorf("%s: stream %+v", k.name, s)
		}
		t.Logf("%s: first frame %v after the call, end %v, %d frames", k.name, s.FirstFrame.Sub(starts[i]), s.End.Sub(starts[i]), s.Frames)
	}
}

// TestStreamSendsWhileServerWrites: the page has most of the first half
// of a 40 MB result while the server still holds its second half.
func TestStreamSendsWhileServerWrites(t *testing.T) {
	spec := fakeServer(t, "lab", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{}, spec)
	ctx := testCtx(t, 120*time.Second)
	p := h.page(ctx)
	hello(t, ctx, p, "binary", "stream")
	connect(t, ctx, p, 1, spec)
	hold := filepath.Join(t.TempDir(), "go-on")
	if err := p.Send(map[string]any{"type": "tools:call", "id": 2, "server": "lab", "tool": "big", "arguments": map[string]any{"bytes": 40_000_000, "holdFile": hold}}); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.WaitStreaming(wait, 15_000_000); err != nil {
		t.Fatalf("the server has written 20 MB and waits: %v", err)
	}
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:call" && string(m.ID) == "2" })
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	if len(r.Raw) < 39_000_000 {
		t.Fatalf("%d bytes", len(r.Raw))
	}
}

// TestStreamFailures: a result found broken or too large after part of it
// went to the page fails the call with the code a result held whole gets,
// the page drops what it received, and the next call works.
func TestStreamFailures(t *testing.T) {
	spec := fakeServer(t, "lab", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{ResultLimit: 48 << 20}, spec)
	ctx := testCtx(t, 120*time.Second)
	p := h.page(ctx)
	hello(t, ctx, p, "binary", "stream")
	connect(t, ctx, p, 1, spec)
	for i, tc := range []struct {
		name, tail string
		bytes      int
		code, says string
	}{
		{"invalid UTF-8 at the end of 40 MB", "bad-utf8", 40_000_000, "server-failed", "is not valid UTF-8"},
		{"invalid JSON at the end of 40 MB", "bad-json", 40_000_000, "server-failed", "could not be read: invalid character ']'"},
		{"over the result limit mid-stream", "", 60_000_000, "too-large", "result of 60000000 bytes is larger than the bridge's limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := 10 + i
			before := len(p.Streams())
			r, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": id, "server": "lab", "tool": "big", "arguments": map[string]any{"bytes": tc.bytes, "tail": tc.tail}})
			if err != nil {
				t.Fatal(err)
			}
			mustErr(t, r, tc.code)
			if !strings.Contains(r.Error.Message, tc.says) {
				t.Errorf("error %q, want it to say %q", r.Error.Message, tc.says)
			}
			streams := p.Streams()
			if len(streams) != before+1 || streams[before].OK || streams[before].Bytes < 1<<20 {
				t.Errorf("streams %+v: want one more, not ok, after some of the result went out", streams[before:])
			}
			small, err := p.Request(ctx, map[string]any{"type": "tools:call", "id": 100 + i, "server": "lab", "tool": "big", "arguments": map[string]any{"bytes": 200_000}})
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, small)
		})
	}
}

// TestStreamPageStopsReading: a page that stops reading while its 40 MB
// result streams does not stop the bridge reading the server: another
// page's calls to the same server are answered meanwhile, and the first
// page, once it reads again, gets its whole result.
func TestStreamPageStopsReading(t *testing.T) {
	spec := fakeServer(t, "lab", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{}, spec)
	ctx := testCtx(t, 120*time.Second)
	stuck, other := h.page(ctx), h.page(ctx)
	hello(t, ctx, stuck, "binary", "stream")
	connect(t, ctx, stuck, 1, spec)
	connect(t, ctx, other, 1, spec)
	release := stuck.HoldReads()
	defer release()
	if err := stuck.Send(map[string]any{"type": "tools:call", "id": 2, "server": "lab", "tool": "big", "arguments": map[string]any{"bytes": 40_000_000}}); err != nil {
		t.Fatal(err)
	}
	// The server answers in the order of the calls: every answer after
	// the big one is read after it.
	for i := range 5 {
		r, err := other.Request(ctx, map[string]any{"type": "tools:call", "id": 10 + i, "server": "lab", "tool": "big", "arguments": map[string]any{"bytes": 1000, "tag": fmt.Sprint(i)}})
		if err != nil {
			t.Fatalf("the other page's call %d: %v", i, err)
		}
		mustOK(t, r)
	}
	release()
	r, err := stuck.Wait(ctx, func(m *bridgetest.Msg) bool { return m.Type == "tools:call" && string(m.ID) == "2" })
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	if n := len(r.Raw); n < 39_000_000 {
		t.Fatalf("the page that stopped reading got %d bytes", n)
	}
}
