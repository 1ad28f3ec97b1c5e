package bridge

import (
	"context"
	"fmt"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/child"
)

// After a call is cancelled (by its page, its timeout, or its tab
// closing) the bridge sends notifications/cancelled and answers the page
// at once. A server may keep computing anyway (a synchronous tool in a
// worker thread that nothing stops): its next call then waits behind the
// cancelled one, which the page would meet as an unexplained delay. For a
// stdio server whose processes the bridge can measure, watchCancels
// samples the server's process tree after each cancel, while no other
// call is in flight (whose work could not be told from the cancelled
// one's); while it stays busy, and until a call made since is answered,
// busyAfterCancel says since when, every new call on the server gets
// a progress note saying why it may wait, and tools:servers and the status
// page show it.

// The bounds of the watch after a cancel (the same as check's, §6).
const (
	// afterCancelGrace: how long the server has to stop before it is
	// measured.
	afterCancelGrace = time.Second
	// afterCancelWindow: each measure of the tree's CPU spans this.
	afterCancelWindow = time.Second
	// afterCancelBusy: above this many CPUs over a window, the server is
	// still working on the cancelled call.
	afterCancelBusy = 0.2
)

// noteCancel tells watchCancels that a call of this session was cancelled.
// It never blocks: one pending signal stands for any number.
func (s *session) noteCancel() {
	select {
	case s.cancelled <- struct{}{}:
	default:
	}
}

// callEnded tells the watch that a call which started at start was
// answered by the server: if it started after the server was found busy,
// the server got to it, so the cancelled work is over (its lock, say, was
// released), however busy the new work keeps it.
func (s *session) callEnded(start time.Time) {
	since := s.busyAfterCancel.Load()
	if since != 0 && start.UnixNano() > since {
		s.busyAfterCancel.CompareAndSwap(since, 0)
	}
}

// busyAfterCancelFor is how long the server has been measured busy since
// a cancel, 0 when it is not.
func (s *session) busyAfterCancelFor() time.Duration {
	since := s.busyAfterCancel.Load()
	if since == 0 {
		return 0
	}
	return max(time.Since(time.Unix(0, since)), time.Millisecond)
}

// busyNote is the progress message a new call gets while the server is
// still busy after a cancel, or "".
func (s *session) busyNote() string {
	d := s.busyAfterCancelFor()
	if d == 0 {
		return ""
	}
	return fmt.Sprintf("%s is still finishing a cancelled call (busy for %s since the cancel): this call may wait until it is done", s.spec.Name, d.Round(time.Second))
}

// watchCancels measures the server's process tree (group pgid, leader
// pid) after each cancel: after afterCancelGrace, one window at a time,
// until a window in which it used at most afterCancelBusy CPUs. Run by run
// until ctx ends; it returns at once where CPU time is not measured.
func (s *session) watchCancels(ctx context.Context, pgid, pid int) {
	if !child.CPUMeasured() || pid <= 0 {
		return
	}
	log := s.b.log.With("server", s.spec.Name)
	sample := func() map[int]time.Duration {
		out := map[int]time.Duration{}
		for _, p := range child.Tree(pgid, pid) {
			out[p.PID] = p.CPU
		}
		return out
	}
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.cancelled:
		}
		if !wait(afterCancelGrace) {
			return
		}
		cancelledAt := time.Now().Add(-afterCancelGrace)
		for {
			before, start := sample(), time.Now()
			if !wait(afterCancelWindow) {
				return
			}
			var used time.Duration
			for p, t := range sample() {
				used += max(0, t-before[p])
			}
			cpus := used.Seconds() / time.Since(start).Seconds()
			if cpus <= afterCancelBusy {
				if since := s.busyAfterCancel.Swap(0); since != 0 {
					log.Info("server done with a cancelled call", "busy", time.Since(time.Unix(0, since)).Round(time.Millisecond))
				}
				break
			}
			if s.busyAfterCancel.Load() == 0 && s.callCount() > 0 {
				// Calls in flight may be what keeps it busy: the cancelled
				// work cannot be told from theirs. Measured again when the
				// session is idle (the next window).
				continue
			}
			if s.busyAfterCancel.CompareAndSwap(0, cancelledAt.UnixNano()) {
				log.Warn("server still computing after a cancelled call: its next calls wait", "cpus", fmt.Sprintf("%.2f", cpus))
			}
			if bound := s.b.opts.RestartBusyAfterCancel; bound > 0 {
				if busy := s.busyAfterCancelFor(); busy >= bound {
					why := fmt.Sprintf("restarted: it kept computing a cancelled call for %s (restart_busy_after_cancel)", busy.Round(time.Second))
					log.Warn("ending the session of a server busy after a cancel", "busy", busy.Round(time.Millisecond), "bound", bound)
					s.declareGone(why)
					return
				}
			}
		}
	}
}
