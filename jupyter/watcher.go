package jupyter

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
)

// Watcher gives fresh Configs cheaply. Current re-reads the configuration
// when a file Load reads (or would read if it existed) was created,
// removed or changed (size, modification or change time, inode) since the
// last load, or when the last load is older than MaxAge; otherwise it
// returns the cached Config. The Python is found once. Safe for concurrent
// use; concurrent callers share one load.
//
// A load runs on a goroutine of the Watcher's, so that a slow one (a
// jupyter_server_config.py that sleeps, which any process of the user can
// write) never holds up a caller that has a Config already: Current waits
// for it at most Patience, then returns the last good Config with a
// problem saying the read is slow, and the load's result is taken when it
// ends. Close waits for a load under way.
type Watcher struct {
	l      *loader
	maxAge time.Duration
	// Patience is how long Current waits for a load when it has a Config
	// to fall back on. If zero, WatcherPatience.
	Patience time.Duration

	ctx    context.Context // ended by Close; the loads' parent
	cancel context.CancelFunc
	wg     sync.WaitGroup // the load under way

	mu      sync.Mutex
	cur     *Config       // guarded by mu
	stamps  []fileStamp   // guarded by mu
	loaded  time.Time     // guarded by mu; when cur's load began
	loading chan struct{} // guarded by mu; non-nil while a load runs, closed by it when it ends
	since   time.Time     // guarded by mu; when the load under way began
	err     error         // guarded by mu; the last load's error
}

// WatcherMaxAge is how old a Config may get before Current re-reads it
// even though no file changed (a command may have been installed).
const WatcherMaxAge = 30 * time.Second

// WatcherPatience is how long Current waits for a load by default when it
// has a Config to fall back on.
const WatcherPatience = 2 * time.Second

// NewWatcher returns a Watcher for opts. It reads nothing until Current.
func NewWatcher(opts Options) *Watcher {
	ctx, cancel := context.WithCancel(context.Background())
	return &Watcher{l: newLoader(opts), maxAge: WatcherMaxAge, ctx: ctx, cancel: cancel}
}

// Close ends a load under way and waits for it.
func (w *Watcher) Close() {
	w.cancel()
	w.wg.Wait()
}

// Current returns the configuration as of now. The first time it waits
// for the load (until ctx ends: then it returns a Config that holds only a
// problem); later, at most Patience (see Watcher).
func (w *Watcher) Current(ctx context.Context) *Config {
	w.mu.Lock()
	if w.cur != nil && w.loading == nil && time.Since(w.loaded) < w.maxAge && !changed(w.stamps) {
		cur := w.cur
		w.mu.Unlock()
		return cur
	}
	if w.loading == nil && w.ctx.Err() == nil {
		w.loading, w.since = make(chan struct{}), time.Now()
		w.wg.Add(1)
		go w.load(w.loading, w.since)
	}
	loading, cur, since := w.loading, w.cur, w.since
	w.mu.Unlock()
	if loading == nil { // closed
		if cur != nil {
			return cur
		}
		return &Config{Admin: DefaultAdmin(), Problems: []bridge.Problem{{Message: "the configuration could not be read: the bridge is stopping"}}}
	}

	var bound <-chan time.Time
	if cur != nil {
		patience := w.Patience
		if patience == 0 {
			patience = WatcherPatience
		}
		t := time.NewTimer(patience - time.Since(since))
		defer t.Stop()
		bound = t.C
	}
	select {
	case <-loading:
	case <-ctx.Done():
	case <-bound:
		slow := *cur
		slow.Problems = append(append([]bridge.Problem(nil), cur.Problems...), bridge.Problem{
			Message: fmt.Sprintf("reading the configuration again has taken %s so far (a jupyter_server_config.py that is slow to evaluate?): the last configuration read stays in force until it ends", time.Since(since).Round(100*time.Millisecond))})
		return &slow
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur == nil {
		err := w.err
		if err == nil {
			err = ctx.Err()
		}
		why := "the configuration could not be read"
		if err != nil {
			why += ": " + err.Error()
		}
		return &Config{Admin: DefaultAdmin(), Problems: []bridge.Problem{{Message: why}}}
	}
	return w.cur
}

// load reads the configuration on the Watcher's goroutine and takes it,
// unless it failed (then the last one stays), and closes done.
func (w *Watcher) load(done chan struct{}, start time.Time) {
	defer w.wg.Done()
	cfg, err := w.l.load(w.ctx)
	var stamps []fileStamp
	if err == nil {
		stamps = stampAll(cfg.watched)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.cur, w.loaded, w.stamps = cfg, start, stamps
	}
	w.err = err
	w.loading = nil
	close(done)
}

type fileStamp struct {
	path   string
	exists bool
	size   int64
	mtime  time.Time
	change changeStamp // the inode and change time, where the system has them
}

func stamp(path string) fileStamp {
	s := fileStamp{path: path}
	fi, err := os.Stat(path)
	if err != nil {
		return s
	}
	s.exists, s.size, s.mtime = true, fi.Size(), fi.ModTime()
	s.change = changeStampOf(fi)
	return s
}

func stampAll(paths []string) []fileStamp {
	out := make([]fileStamp, len(paths))
	for i, p := range paths {
		out[i] = stamp(p)
	}
	return out
}

func changed(stamps []fileStamp) bool {
	for _, s := range stamps {
		if stamp(s.path) != s {
			return true
		}
	}
	return false
}
