package child

import (
	"context"
	"fmt"
	"time"
)

// WatchOptions configures WatchParent.
type WatchOptions struct {
	// Poll is how often the parent is looked at. If zero, 250 ms: the exit
	// then comes well within 2 s of the parent's death.
	Poll time.Duration
	// NoNotice turns off the kernel's notice of the parent's death (Linux),
	// leaving the poll alone; for tests that show the poll is enough.
	NoNotice bool
}

// WatchParent blocks until ctx ends (it returns nil) or the process ppid,
// this process's parent when it started, has exited (it returns an error
// saying so). On Linux and macOS the parent's death shows as a changed
// parent id (the orphan is handed to init or a subreaper); on Linux the
// kernel also wakes the watch at once (PR_SET_PDEATHSIG, a hint only: it
// fires when the parent's *thread* exits). On Windows the parent's process
// handle, opened when the watch starts, tells. It holds the calling
// goroutine's thread while it runs: run it on a goroutine of its own.
func WatchParent(ctx context.Context, ppid int, opts WatchOptions) error {
	if opts.Poll <= 0 {
		opts.Poll = 250 * time.Millisecond
	}
	w := newParentWatch(ppid, !opts.NoNotice)
	defer w.release()
	t := time.NewTicker(opts.Poll)
	defer t.Stop()
	for {
		if w.gone() {
			return fmt.Errorf("the process that started the bridge (pid %d, the Jupyter server under jupyter-server-proxy) has exited", ppid)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-w.wake:
		}
	}
}
