package child

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// becomeSubreaper makes this process (the keeper) the reaper of orphaned
// descendants.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// serverSysProcAttr is how the keeper starts the server: killed if the
// keeper dies without cleaning up (the OOM killer may pick the keeper).
func serverSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// keeperSysProcAttr is how the bridge starts the keeper: leader of a new
// process group, and sent SIGHUP when the bridge's thread that started it
// exits, a backup for the lifeline (the keeper treats SIGHUP after its
// parent changed as the bridge's death; SIGKILL would kill the keeper before
// it could kill the server's descendants).
func keeperSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGHUP}
}

// waitNoReap blocks until process pid has exited, leaving it waitable (a
// zombie), so that its pid (and process group id) stays reserved.
func waitNoReap(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// groupSysProcAttr is how InGroup starts a short-lived child.
func groupSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
