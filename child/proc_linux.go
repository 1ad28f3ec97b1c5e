package child

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// Processes reads pid, state, ppid and pgrp of every process in /proc.
func Processes() []ProcInfo {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make([]ProcInfo, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if e, ok := Lookup(pid); ok {
			out = append(out, e)
		}
	}
	return out
}

// Lookup is process pid's row of the process table (/proc/<pid>/stat).
func Lookup(pid int) (ProcInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ProcInfo{}, false
	}
	// "pid (comm) state ppid pgrp ..."; comm may contain spaces and parens.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return ProcInfo{}, false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 3 || len(f[0]) != 1 {
		return ProcInfo{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return ProcInfo{}, false
	}
	info := ProcInfo{PID: pid, PPID: ppid, Group: pgrp, State: f[0][0]}
	if len(f) >= 13 { // f[11] utime, f[12] stime, in USER_HZ ticks
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		info.CPU = time.Duration(utime+stime) * time.Second / userHZ
	}
	return info, true
}

// userHZ is the unit of utime and stime in /proc/<pid>/stat: 100 in the
// ABI of every Linux architecture.
const userHZ = 100

// CPUMeasured reports whether ProcInfo.CPU is filled in on this system.
func CPUMeasured() bool { return true }
