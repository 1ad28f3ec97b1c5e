package child

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// start makes this process a child subreaper and starts the sweep loop,
// which sweeps whenever a child exits (a keeper killed: its orphans were
// just re-parented here) and every Interval.
func (r *Reaper) start() error {
	if err := becomeSubreaper(); err != nil {
		return err
	}
	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, syscall.SIGCHLD)
	r.wg.Add(1)
	go func() { // the sweep loop: ends at Close
		defer r.wg.Done()
		defer signal.Stop(sigchld)
		tick := time.NewTicker(r.opts.Interval)
		defer tick.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-sigchld:
			case <-tick.C:
			}
			r.sweep()
		}
	}()
	return nil
}

// sweep kills and reaps the orphans among this process's children (see
// Reaper).
func (r *Reaper) sweep() {
	self := os.Getpid()
	sid, err := unix.Getsid(0)
	if err != nil {
		return
	}
	pgid := unix.Getpgrp()
	for _, p := range Processes() {
		if p.PPID != self {
			continue
		}
		psid, err := unix.Getsid(p.PID)
		if err != nil {
			continue // gone already, or not ours to ask about
		}
		if psid == sid && psid != p.PID && (p.Group == p.PID || p.Group == pgid) {
			continue // started by this process (see Reaper)
		}
		if p.State != 'Z' {
			_ = unix.Kill(p.PID, unix.SIGKILL)
			if p.Group == p.PID {
				_ = unix.Kill(-p.PID, unix.SIGKILL) // what it leads goes too; its children come here next
			}
			r.mu.Lock()
			r.killed++
			r.mu.Unlock()
			r.opts.Logger.Warn("killed a process a tool server left behind after killing its keeper", "pid", p.PID, "group", p.Group, "session", psid)
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(p.PID, &ws, unix.WNOHANG, nil) // a zombie is reaped now; a killed one at the SIGCHLD it sends
	}
}
