package child

import "time"

// ProcInfo is one row of the process table.
type ProcInfo struct {
	PID, PPID int
	// Group is the process group id on Linux and macOS; the pid on Windows.
	Group int
	// State is 'Z' for a zombie (exited, not yet reaped), else the
	// system's state letter ('R', 'S', …; 'R' where the system has none).
	State byte
	// CPU is the user and system CPU time the process has used; zero where
	// CPUMeasured is false.
	CPU time.Duration
}

// Tree is every process in process group group (Linux, macOS) and every
// descendant of group and of roots, which may have left the group: the
// processes of one tool server.
func Tree(group int, roots ...int) []ProcInfo {
	all := map[int]ProcInfo{}
	children := map[int][]int{}
	for _, p := range Processes() {
		all[p.PID] = p
		if p.PPID != p.PID {
			children[p.PPID] = append(children[p.PPID], p.PID)
		}
	}
	in := map[int]bool{}
	var out []ProcInfo
	var walk func(pid int)
	walk = func(pid int) {
		p, ok := all[pid]
		if !ok || in[pid] {
			return
		}
		in[pid] = true
		out = append(out, p)
		for _, c := range children[pid] {
			walk(c)
		}
	}
	for pid, p := range all {
		if p.Group == group {
			walk(pid)
		}
	}
	walk(group)
	for _, r := range roots {
		walk(r)
	}
	return out
}
