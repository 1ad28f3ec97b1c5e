package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
)

// BenchmarkFloor measures the bridge's own throughput for a large result
// (held whole, and streamed: bridge-stream),
// without the tool server's work: a bridgetest server replays a prebuilt
// 40 MB water box (a fixture) and the bridge relays it to a Go page client
// (bridgetest.Page, which reassembles chunks and parses the reply). Beside
// it, the floor: a plain gorilla WebSocket server sending the same reply to
// the same client as one message, and the same bytes read from a pipe.
// Target: bridge ≤ 1.5 × gorilla, bridge-stream ≤ 1.3 × (judged on
// alternating, which times the two in turn in one run). ns/op is one
// 40 MB result.
func BenchmarkFloor(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	fixture := atomsFixture(b, exe, 500000)
	raw, err := os.ReadFile(fixture)
	if err != nil {
		b.Fatal(err)
	}
	var fix struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(raw, &fix); err != nil {
		b.Fatal(err)
	}
	result := fix.Result

	calls := func(b *testing.B, p *bridgetest.Page) {
		if got := callAtoms(b, p, "warm", 1); len(got) < len(result)-1024 {
			b.Fatalf("the result is %d bytes, want about %d", len(got), len(result))
		}
		b.SetBytes(int64(len(result)))
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			callAtoms(b, p, fmt.Sprintf("c%d", i), 1)
		}
	}
	dial := func(b *testing.B, url string) *bridgetest.Page {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p, _, err := bridgetest.Dial(ctx, url, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		return p
	}

	// The bridge, its page asking for features in tools:hello (none: the
	// result held whole and sent as text chunk frames).
	bridgePage := func(b *testing.B, features ...string) *bridgetest.Page {
		mode := bridgetest.Mode{FixtureCalls: map[string]string{"atoms": fixture}}
		servers, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"bridgetest": map[string]any{
			"command": exe, "args": []string{"-test.run=^$"},
			"env": map[string]string{bridgetest.EnvVar: strings.TrimPrefix(mode.Env(), bridgetest.EnvVar+"=")}}}})
		path := filepath.Join(b.TempDir(), "servers.json")
		if err := os.WriteFile(path, servers, 0o600); err != nil {
			b.Fatal(err)
		}
		// The bridge in a process of its own, as deployed (in this
		// process its memory ceiling would count the benchmark's too).
		ready := filepath.Join(b.TempDir(), "ready")
		cmd := exec.Command(exe, "serve", "--standalone", "--port", "0", "--ready-file", ready, "--token", "floor-token-0123456789", "--servers", path)
		cmd.Env = append(os.Environ(), asProgramEnv+"=1")
		var stderr bridgetest.Buffer
		cmd.Stderr = &stderr
		child.InGroup(cmd)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { child.KillGroup(cmd.Process); cmd.Wait() })
		var addr []byte
		for deadline := time.Now().Add(20 * time.Second); len(addr) == 0; time.Sleep(20 * time.Millisecond) {
			addr, _ = os.ReadFile(ready)
			if time.Now().After(deadline) {
				b.Fatalf("the bridge did not get ready:\n%s", stderr.String())
			}
		}
		p := dial(b, "ws://"+strings.TrimSpace(string(addr))+"/megane/builder-tools/ws?token=floor-token-0123456789")
		if len(features) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := p.Request(ctx, map[string]any{"type": "tools:hello", "id": "h", "features": features}); err != nil {
				b.Fatal(err)
			}
		}
		connectBridgetest(b, p)
		return p
	}
	bridgeWith := func(features ...string) func(b *testing.B) {
		return func(b *testing.B) {
			p := bridgePage(b, features...)
			calls(b, p)
			if streamed := len(p.Streams()); len(features) > 1 && streamed == 0 {
				b.Fatal("the page asked for streams and got none")
			}
		}
	}
	b.Run("bridge", bridgeWith())
	// The result streamed while it is read (feature "stream").
	b.Run("bridge-stream", bridgeWith("binary", "stream"))

	// A plain gorilla server answering each call with the reply around
	// result: as one message, or (chunked) as the protocol's tools:chunk
	// frames of at most 8 MiB, escaped per call as the bridge does, so the
	// client's work is the same as with the bridge.
	plainPage := func(b *testing.B, chunked bool) *bridgetest.Page {
		up := websocket.Upgrader{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer ws.Close()
			for seqID := 0; ; seqID++ {
				var m struct {
					Type string          `json:"type"`
					ID   json.RawMessage `json:"id"`
				}
				if err := ws.ReadJSON(&m); err != nil {
					return
				}
				reply := fmt.Appendf(nil, `{"type":%q,"id":%s,"ok":true,"result":`, m.Type, m.ID)
				reply = append(append(reply, result...), '}')
				frames := [][]byte{reply}
				if chunked {
					frames = chunkFrames(reply, "g"+strconv.Itoa(seqID), 8<<20)
				}
				for _, f := range frames {
					if ws.WriteMessage(websocket.TextMessage, f) != nil {
						return
					}
				}
			}
		}))
		b.Cleanup(srv.Close)
		return dial(b, "ws"+strings.TrimPrefix(srv.URL, "http"))
	}
	plain := func(chunked bool) func(b *testing.B) {
		return func(b *testing.B) { calls(b, plainPage(b, chunked)) }
	}
	b.Run("gorilla", plain(false))
	b.Run("gorilla-chunked", plain(true))

	// The streamed page and the one-message gorilla server, one call each
	// in turn, so that both see the machine in the same state (its spread
	// over minutes is wider than the difference): stream-ms/op,
	// gorilla-ms/op and stream/gorilla (target ≤ 1.3). ns/op is the pair.
	b.Run("alternating", func(b *testing.B) {
		stream, gor := bridgePage(b, "binary", "stream"), plainPage(b, false)
		callAtoms(b, stream, "warm-s", 1)
		callAtoms(b, gor, "warm-g", 1)
		var tStream, tGorilla time.Duration
		b.SetBytes(2 * int64(len(result)))
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			start := time.Now()
			callAtoms(b, stream, fmt.Sprintf("s%d", i), 1)
			tStream += time.Since(start)
			start = time.Now()
			callAtoms(b, gor, fmt.Sprintf("g%d", i), 1)
			tGorilla += time.Since(start)
		}
		if len(stream.Streams()) == 0 {
			b.Fatal("the page asked for streams and got none")
		}
		n := float64(b.N)
		b.ReportMetric(float64(tStream.Milliseconds())/n, "stream-ms/op")
		b.ReportMetric(float64(tGorilla.Milliseconds())/n, "gorilla-ms/op")
		b.ReportMetric(tStream.Seconds()/tGorilla.Seconds(), "stream/gorilla")
	})

	b.Run("pipe", func(b *testing.B) {
		b.SetBytes(int64(len(result)))
		for b.Loop() {
			r, w, err := os.Pipe()
			if err != nil {
				b.Fatal(err)
			}
			go func() { w.Write(result); w.Close() }()
			n, err := io.Copy(io.Discard, r)
			r.Close()
			if err != nil || n != int64(len(result)) {
				b.Fatalf("read %d bytes from the pipe: %v", n, err)
			}
		}
	})
}

// chunkFrames cuts msg into tools:chunk frames of at most limit bytes, each
// as full as it may be, cut between characters (PROTOCOL.md, "Chunks").
func chunkFrames(msg []byte, id string, limit int) [][]byte {
	budget := limit - 256 // the frame's other fields
	// escaped bounds the length of p as a JSON string's contents.
	escaped := func(p []byte) int {
		n := 0
		for _, c := range p {
			switch {
			case c == '"' || c == '\\' || c >= utf8.RuneSelf:
				n += 2
			case c < 0x20:
				n += 6
			default:
				n++
			}
		}
		return n
	}
	var pieces [][]byte
	for rest := msg; len(rest) > 0; {
		n := min(len(rest), budget)
		for {
			for n < len(rest) && !utf8.RuneStart(rest[n]) {
				n--
			}
			e := escaped(rest[:n])
			if e <= budget {
				break
			}
			n -= e - budget
		}
		pieces = append(pieces, rest[:n])
		rest = rest[n:]
	}
	var frames [][]byte
	for seq, p := range pieces {
		var data bytes.Buffer
		enc := json.NewEncoder(&data)
		enc.SetEscapeHTML(false)
		enc.Encode(string(p))
		f := fmt.Appendf(nil, `{"type":"tools:chunk","id":%q,"seq":%d,"count":%d,"size":%d,"data":`, id, seq, len(pieces), len(msg))
		f = append(bytes.TrimRight(append(f, data.Bytes()...), "\n"), '}')
		frames = append(frames, f)
	}
	return frames
}
