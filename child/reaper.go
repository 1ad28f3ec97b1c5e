package child

import (
	"log/slog"
	"sync"
	"time"
)

// ReaperOptions configure StartReaper.
type ReaperOptions struct {
	// Interval is how often the reaper looks for orphans besides when one
	// of the bridge's children exits. If zero, 1s.
	Interval time.Duration
	// Logger receives one line per orphan killed. If nil, nothing is
	// logged.
	Logger *slog.Logger
}

// A Reaper makes the bridge the reaper of what its keepers leave behind.
//
// A keeper kills every descendant of its server when the server exits or
// the bridge goes (keeper_unix.go). A server can kill its keeper, though
// (same user, no privilege needed): a daemon it double-forked into a
// session of its own then outlives the keeper's group. On Linux the bridge
// is a child subreaper too, so such an orphan is re-parented to the bridge
// rather than to init, and the reaper kills it and reaps it. It recognizes
// an orphan as a child of the bridge that the bridge did not start: every
// process the bridge starts (Start's keepers, InGroup's helpers, a plain
// exec.Cmd) stays in the bridge's session and either leads a process
// group of its own or is in the bridge's; an orphan is in another session
// (setsid), or in a group it does not lead (its dead keeper's). A process
// that leaves its keeper's group for a new group of its own in the
// bridge's session, or for the bridge's group, is not recognized: only a
// cgroup (where the system delegates one) would hold it. On other systems
// the Reaper does nothing: macOS has no subreaper, and on Windows the Job
// Object holds a server's descendants whatever happens to the server.
//
// The reaper never waits for a process it did not recognize as an orphan,
// so it never takes an exit status that os/exec or a keeper's owner is
// waiting for.
type Reaper struct {
	opts ReaperOptions
	stop chan struct{}  // closed by Close
	wg   sync.WaitGroup // the sweep loop
	once sync.Once

	mu     sync.Mutex
	killed int // guarded by mu; orphans killed so far
}

// StartReaper makes this process the reaper of orphaned descendants (on
// Linux) and sweeps them until Close. The error says only that the system
// refused to make this process a subreaper; the Reaper is then inert.
func StartReaper(opts ReaperOptions) (*Reaper, error) {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Reaper{opts: opts, stop: make(chan struct{})}
	if err := r.start(); err != nil {
		return r, err
	}
	return r, nil
}

// Close stops the sweeping, after one last sweep. It is safe to call more
// than once and on a nil Reaper.
func (r *Reaper) Close() {
	if r == nil {
		return
	}
	r.once.Do(func() { close(r.stop) })
	r.wg.Wait()
	r.sweep()
}

// Killed is how many orphans the reaper has killed.
func (r *Reaper) Killed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.killed
}
