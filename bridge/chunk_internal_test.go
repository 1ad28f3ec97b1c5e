package bridge

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

func chunkFrame(id string, seq, count, size int, data string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "tools:chunk", "id": id, "seq": seq, "count": count, "size": size, "data": data})
	return b
}

// TestReassemblerBounds, in virtual time: an incomplete sequence expires
// after the timeout and gives its bytes back to the shared pool; a sequence
// that would take the pool over its limit is refused busy, whichever tab's
// reassembler holds the bytes.
func TestReassemblerBounds(t *testing.T) {
	pool := &chunkPool{limit: 100}
	clock := time.Unix(0, 0)
	newR := func() *reassembler {
		r := newReassembler(1000, 4, time.Minute)
		r.now = func() time.Time { return clock }
		r.pool = pool
		return r
	}
	a, b := newR(), newR()
	for _, tc := range []struct {
		name     string
		r        *reassembler
		id       string
		size     int
		wantCode string // "" = taken
		wantUsed int64
	}{
		{"a opens 60", a, "a1", 60, "", 60},
		{"b opens 30", b, "b1", 30, "", 90},
		{"b opens 20 more: over the pool", b, "b2", 20, CodeBusy, 90},
		{"a opens 10", a, "a2", 10, "", 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, perr := tc.r.add(json.RawMessage(fmt.Sprintf("%q", tc.id)), chunkFrame(tc.id, 0, 2, tc.size, "x"))
			switch {
			case tc.wantCode == "" && perr != nil:
				t.Fatalf("refused: %v", perr)
			case tc.wantCode != "" && (perr == nil || perr.Code != tc.wantCode):
				t.Fatalf("got %v, want %s", perr, tc.wantCode)
			}
			if got := pool.used.Load(); got != tc.wantUsed {
				t.Fatalf("pool holds %d bytes, want %d", got, tc.wantUsed)
			}
		})
	}
	clock = clock.Add(time.Minute + time.Second)
	if ids := a.expire(); len(ids) != 2 {
		t.Fatalf("a expired %v, want its two sequences", ids)
	}
	if got := pool.used.Load(); got != 30 {
		t.Fatalf("after a's sequences expired the pool holds %d bytes, want b's 30", got)
	}
	b.closeAll()
	if got := pool.used.Load(); got != 0 || len(b.open) != 0 {
		t.Fatalf("after b closed the pool holds %d bytes, %d open", got, len(b.open))
	}
}

// TestReassemblerTimer: a sequence's timer drops it when no further frame
// arrives, gives its bytes back and reports it once; closeAll stops the
// timers of the sequences still open.
func TestReassemblerTimer(t *testing.T) {
	pool := &chunkPool{limit: 1 << 20}
	r := newReassembler(1<<20, 4, 50*time.Millisecond)
	r.pool = pool
	expired := make(chan string, 4)
	r.onExpire = func(id string) { expired <- id }
	if _, _, perr := r.add(json.RawMessage(`"s"`), chunkFrame("s", 0, 2, 1000, "x")); perr != nil {
		t.Fatal(perr)
	}
	if id := <-expired; id != `"s"` {
		t.Fatalf("expired %s", id)
	}
	r.mu.Lock()
	open, used := len(r.open), pool.used.Load()
	r.mu.Unlock()
	if open != 0 || used != 0 {
		t.Fatalf("after the timer: %d open, %d bytes held", open, used)
	}
	// A later chunk of the expired sequence is ignored, not reopened.
	if _, ignore, _ := r.add(json.RawMessage(`"s"`), chunkFrame("s", 1, 2, 1000, "y")); !ignore {
		t.Fatal("a chunk of an expired sequence was not ignored")
	}
	r.timeout = time.Hour
	if _, _, perr := r.add(json.RawMessage(`"u"`), chunkFrame("u", 0, 2, 1000, "x")); perr != nil {
		t.Fatal(perr)
	}
	r.closeAll()
	if used := pool.used.Load(); used != 0 {
		t.Fatalf("after closeAll %d bytes held", used)
	}
	select {
	case id := <-expired:
		t.Fatalf("%s reported expired after closeAll", id)
	default:
	}
}

// BenchmarkChunkFrames: a 40 MB result made of numbers and keys, as the
// atoms tool writes, planned and escaped into 8 MiB chunk frames.
func BenchmarkChunkFrames(b *testing.B) {
	var msg []byte
	for i := 0; len(msg) < 40<<20; i++ {
		msg = fmt.Appendf(msg, `{"element":"C","x":%.6f,"y":%.6f,"z":%.6f},`, float64(i)*0.37, float64(i)*1.13, float64(i)*-0.71)
	}
	parts := [][]byte{[]byte(`{"type":"tools:call","id":1,"ok":true,"result":[`), msg[:len(msg)-1], []byte(`]}`)}
	sink := frameSink(func([]byte) error { return nil })
	scratch := make([]byte, 0, 32<<10)
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if err := chunkFrames(parts, "b1", 8<<20, scratch, sink); err != nil {
			b.Fatal(err)
		}
	}
}
