package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// parentPoll is how often serve, in Jupyter mode, compares its parent
// process id with the one that started it. The parent's death is noticed
// by that comparison: a process whose parent exits is handed to another
// (init or a subreaper), so getppid changes. On Linux the kernel also
// wakes the watch at once (parentDeathWakeup, PR_SET_PDEATHSIG), but that
// signal is only a hint: it fires when the *thread* that forked the bridge
// exits, which need not be the whole parent (it may fire while the parent
// lives, and it is lost if it fires before it is set). 250 ms keeps the
// exit well within 2 s of the parent's death, shutdown included, for a
// getppid call four times a second.
const parentPoll = 250 * time.Millisecond

// useParentDeathNotice says whether watchParent asks for the kernel's
// notice as well as polling. Only tests turn it off, to show the poll alone
// is enough; set before serve runs.
var useParentDeathNotice = true

// watchParent blocks until ctx ends (it returns nil) or the process's
// parent is no longer ppid (it returns an error saying so), comparing
// every poll and whenever parentDeathWakeup's signal arrives. It holds the
// calling goroutine's thread while it runs (parentDeathWakeup binds the
// kernel's notice to that thread): run it on a goroutine of its own.
func watchParent(ctx context.Context, ppid int, poll time.Duration) error {
	var wake <-chan os.Signal
	if useParentDeathNotice {
		var release func()
		wake, release = parentDeathWakeup()
		defer release()
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if now := os.Getppid(); now != ppid {
			return fmt.Errorf("the process that started the bridge (pid %d, the Jupyter server under jupyter-server-proxy) has exited", ppid)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-wake:
		}
	}
}
