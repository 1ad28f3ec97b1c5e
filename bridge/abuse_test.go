package bridge_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// journalStarts returns the pids of the Start entries of a journal so far.
func journalStarts(path string) []int {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var pids []int
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var e bridgetest.JournalEntry
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Start {
			pids = append(pids, e.Pid)
		}
	}
	return pids
}

// liveChildren counts the live processes (not zombies) whose command line
// holds marker: the servers this test started, under their keepers.
func liveChildren(marker string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	n := 0
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		st, _, ok := bridgetest.ProcStat(pid)
		if !ok || st == "Z" || st == "X" {
			continue
		}
		cmd, err := os.ReadFile(d + "/cmdline")
		if err == nil && strings.Contains(string(cmd), marker) {
			n++
		}
	}
	return n
}

// TestSpawnChurn: tabs that connect and close (or drop before the answer)
// in a quick loop never make the bridge run more than one process of a
// server plus one stopping. Bound: at most 2 live processes at any sample;
// every connect that waits for its answer gets ok.
func TestSpawnChurn(t *testing.T) {
	jr := journal(t)
	// A server slow to stop (it outlives its stdin and ignores SIGTERM) makes each stop last
	// TerminateDuration + KillDuration, the window in which the bridge used to start
	// another copy.
	spec := fakeServer(t, "churn", bridgetest.Mode{Journal: jr, IgnoreSIGTERM: true, LingerAfterEOF: true})
	marker := "-bridgetest.churn=" + strconv.Itoa(os.Getpid())
	spec.Args = append(spec.Args, marker)
	h := newHarness(t, bridge.Options{TerminateDuration: 200 * time.Millisecond, KillDuration: 300 * time.Millisecond}, spec)
	ctx := testCtx(t, 2*time.Minute)

	// Sample the live processes (started, not yet gone or a zombie).
	var maxLive atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			live := liveChildren(marker)
			if int64(live) > maxLive.Load() {
				maxLive.Store(int64(live))
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()

	const workers, cycles = 2, 20 // 40 connect/close cycles, 2 at once; 3 of 4 drop early
	var wg sync.WaitGroup
	var okCount atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range cycles {
				p, _, err := bridgetest.Dial(ctx, h.wsURL, nil)
				if err != nil {
					t.Errorf("dial: %v", err)
					return
				}
				if (w+i)%4 != 0 {
					// Drop the tab while its connect waits for the start: the
					// tools:servers answer comes after the connect was taken.
					_ = p.Send(map[string]any{"type": "tools:connect", "id": 1, "server": spec.Name,
						"fingerprint": spec.Fingerprint, "confirmed": true})
					_, _ = p.Request(ctx, map[string]any{"type": "tools:servers", "id": 2})
					p.Close()
					continue
				}
				r, err := p.Request(ctx, map[string]any{"type": "tools:connect", "id": 1, "server": spec.Name,
					"fingerprint": spec.Fingerprint, "confirmed": true})
				p.Close()
				if err != nil || r.OK == nil || !*r.OK {
					t.Errorf("connect in cycle %d/%d: %v %v", w, i, r, err)
					return
				}
				okCount.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stopSampling)
	<-sampled
	starts := len(journalStarts(jr))
	t.Logf("%d connects answered ok, %d processes started, at most %d live at once", okCount.Load(), starts, maxLive.Load())
	t.Logf("abuse: connect/close churn, %d cycles | at most 2 processes of a server live | %d live at most", workers*cycles, maxLive.Load())
	if got := maxLive.Load(); got > 2 {
		t.Fatalf("%d processes of one server were live at once; the bound is 2 (one running, one stopping)", got)
	}
	if okCount.Load() != workers*cycles/4 {
		t.Fatalf("%d of %d waited-for connects succeeded", okCount.Load(), workers*cycles/4)
	}
}

// TestPendingConnectsBounded: a tab may have at most MaxPendingConnects
// connects in flight; the rest are answered busy at once, and the tab and
// its other requests carry on.
func TestPendingConnectsBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  int // Options.MaxPendingConnects
		want int // the bound in effect
	}{
		{"default", 0, 8},
		{"three", 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := fakeServer(t, "hangs", bridgetest.Mode{HangInit: true})
			h := newHarness(t, bridge.Options{MaxPendingConnects: tc.max}, spec)
			ctx := testCtx(t, time.Minute)
			p := h.page(ctx)
			const extra = 5
			for id := 1; id <= tc.want+extra; id++ {
				if err := p.Send(map[string]any{"type": "tools:connect", "id": id, "server": spec.Name,
					"fingerprint": spec.Fingerprint, "confirmed": true}); err != nil {
					t.Fatal(err)
				}
			}
			// The page's frames are handled in order: once tools:servers is
			// answered, every connect before it has been answered or taken.
			r, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": "s"})
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, r)
			busy := 0
			for _, m := range p.All() {
				if m.Type != "tools:connect" {
					continue
				}
				mustErr(t, m, "busy")
				var id int
				if err := json.Unmarshal(m.ID, &id); err != nil || id <= tc.want {
					t.Fatalf("connect %s was refused, but only those after the first %d may be", m.ID, tc.want)
				}
				busy++
			}
			if busy != extra {
				t.Fatalf("%d connects answered busy, want %d", busy, extra)
			}
			// The connects taken are still in flight, and answerable.
			r, err = p.Request(ctx, map[string]any{"type": "tools:cancel", "id": 1})
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, r)
			if r, err = p.Reply(ctx, "tools:connect", 1); err != nil {
				t.Fatal(err)
			}
			mustErr(t, r, "cancelled")
		})
	}
}

// heapAlloc is the live heap after a collection.
func heapAlloc() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestHalfSentChunkReleased: a chunk sequence left half-sent is dropped by
// its timer after ChunkTimeout, with no further frame from the page, and
// the memory it declared is released. Bounds: the bad-request answer comes
// unprompted; the heap returns to within 16 MiB of where it was before the
// 48 MiB sequence was opened.
func TestHalfSentChunkReleased(t *testing.T) {
	h := newHarness(t, bridge.Options{ChunkTimeout: 300 * time.Millisecond})
	ctx := testCtx(t, time.Minute)
	p := h.page(ctx)
	const size = 48 << 20
	base := heapAlloc()
	if err := p.Send(map[string]any{"type": "tools:chunk", "id": "half", "seq": 0, "count": 2, "size": size, "data": "x"}); err != nil {
		t.Fatal(err)
	}
	r, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": "s"})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r)
	held := heapAlloc()
	r, err = p.Reply(ctx, "tools:chunk", "half")
	if err != nil {
		t.Fatal(err)
	}
	mustErr(t, r, "bad-request")
	after := heapAlloc()
	t.Logf("heap: %d MiB before, %d MiB with the sequence open, %d MiB after it expired", base>>20, held>>20, after>>20)
	t.Logf("abuse: a 48 MiB chunk sequence left half-sent | released by its timer, heap back within 16 MiB | heap %d → %d → %d MiB", base>>20, held>>20, after>>20)
	if held-base < size/2 {
		t.Fatalf("the open sequence did not show in the heap (%d bytes more): the measurement is not valid", held-base)
	}
	if after-base > 16<<20 {
		t.Fatalf("%d MiB still held after the sequence expired", (after-base)>>20)
	}
}

// TestChunkMemoryShared: the incomplete sequences of all tabs together are
// bounded by ChunkMemory; a sequence over it is refused busy and the tab
// carries on.
func TestChunkMemoryShared(t *testing.T) {
	h := newHarness(t, bridge.Options{ChunkMemory: 1 << 20})
	ctx := testCtx(t, time.Minute)
	a, b := h.page(ctx), h.page(ctx)
	const size = 700 << 10
	for _, tc := range []struct {
		name string
		p    *bridgetest.Page
		id   string
		want string // "" = taken
	}{
		{"first tab takes 700 KiB", a, "a", ""},
		{"second tab's 700 KiB is over 1 MiB", b, "b", "busy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.p.Send(map[string]any{"type": "tools:chunk", "id": tc.id, "seq": 0, "count": 2, "size": size, "data": "x"}); err != nil {
				t.Fatal(err)
			}
			r, err := tc.p.Request(ctx, map[string]any{"type": "tools:servers", "id": "s" + tc.id})
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, r)
			var got *bridgetest.Msg
			for _, m := range tc.p.All() {
				if m.Type == "tools:chunk" {
					got = m
				}
			}
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("refused: %s", got)
			case tc.want != "" && got == nil:
				t.Fatal("not refused")
			case tc.want != "":
				mustErr(t, got, tc.want)
			}
		})
	}
}
