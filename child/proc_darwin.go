package child

import "golang.org/x/sys/unix"

// Processes reads pid, ppid, process group and state of every process
// (sysctl kern.proc.all).
func Processes() []ProcInfo {
	kps, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil
	}
	out := make([]ProcInfo, 0, len(kps))
	for _, kp := range kps {
		state := byte('R')
		if kp.Proc.P_stat == 5 { // SZOMB
			state = 'Z'
		}
		out = append(out, ProcInfo{PID: int(kp.Proc.P_pid), PPID: int(kp.Eproc.Ppid), Group: int(kp.Eproc.Pgid), State: state})
	}
	return out
}

// CPUMeasured reports whether ProcInfo.CPU is filled in on this system: not
// on macOS, where a process's CPU time needs libproc (cgo).
func CPUMeasured() bool { return false }

// Lookup is process pid's row of the process table.
func Lookup(pid int) (ProcInfo, bool) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || int(kp.Proc.P_pid) != pid {
		return ProcInfo{}, false
	}
	state := byte('R')
	if kp.Proc.P_stat == 5 { // SZOMB
		state = 'Z'
	}
	return ProcInfo{PID: pid, PPID: int(kp.Eproc.Ppid), Group: int(kp.Eproc.Pgid), State: state}, true
}
