package child

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// becomeSubreaper does nothing: macOS has no subreaper. Orphans of the
// server go to launchd, which reaps them; while they live, signalOthers
// finds them as descendants of the keeper or members of its group.
func becomeSubreaper() error { return nil }

// serverSysProcAttr is how the keeper starts the server: in the keeper's
// group (macOS has no parent-death signal; the keeper's lifeline stands in).
func serverSysProcAttr() *syscall.SysProcAttr { return nil }

// keeperSysProcAttr is how the bridge starts the keeper: leader of a new
// process group. Its lifeline tells it of the bridge's death.
func keeperSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitNoReap blocks until process pid has exited, leaving it waitable (a
// zombie), so that its pid (and process group id) stays reserved. macOS has
// no waitid WNOWAIT that Go can call; a kqueue NOTE_EXIT filter on the pid
// reports the exit without reaping.
func waitNoReap(pid int) {
	kq, err := unix.Kqueue()
	if err != nil {
		return
	}
	defer unix.Close(kq)
	var ev [1]unix.Kevent_t
	unix.SetKevent(&ev[0], pid, unix.EVFILT_PROC, unix.EV_ADD|unix.EV_ONESHOT)
	ev[0].Fflags = unix.NOTE_EXIT
	if _, err := unix.Kevent(kq, ev[:], nil, nil); err != nil {
		return // ESRCH: it has already exited
	}
	for {
		n, err := unix.Kevent(kq, nil, ev[:], nil)
		if n > 0 || (err != nil && err != unix.EINTR) {
			return
		}
	}
}

// groupSysProcAttr is how InGroup starts a short-lived child.
func groupSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
