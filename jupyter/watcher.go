package jupyter

import (
	"context"
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
type Watcher struct {
	l      *loader
	maxAge time.Duration

	mu     sync.Mutex // guards cur, stamps, loaded; held during a load
	cur    *Config
	stamps []fileStamp
	loaded time.Time
}

// WatcherMaxAge is how old a Config may get before Current re-reads it
// even though no file changed (a command may have been installed).
const WatcherMaxAge = 30 * time.Second

// NewWatcher returns a Watcher for opts. It reads nothing until Current.
func NewWatcher(opts Options) *Watcher {
	return &Watcher{l: newLoader(opts), maxAge: WatcherMaxAge}
}

// Current returns the configuration as of now. If ctx ends during a load it
// returns the previous Config (or, before the first load, one that holds
// only a problem).
func (w *Watcher) Current(ctx context.Context) *Config {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur != nil && time.Since(w.loaded) < w.maxAge && !changed(w.stamps) {
		return w.cur
	}
	start := time.Now()
	cfg, err := w.l.load(ctx)
	if err != nil {
		if w.cur != nil {
			return w.cur
		}
		return &Config{Admin: DefaultAdmin(), Problems: []bridge.Problem{{Message: "the configuration could not be read: " + err.Error()}}}
	}
	w.cur, w.loaded = cfg, start
	w.stamps = stampAll(cfg.watched)
	return cfg
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
