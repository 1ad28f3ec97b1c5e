//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat: USER_HZ, 100
// in the ABI of every Linux architecture.
const userHZ = 100

// procStat is what treeCPU needs of one /proc/<pid>/stat.
type procStat struct {
	ppid, pgrp int
	cpu        time.Duration // utime + stime
}

// treeCPU returns the CPU time (user + system) each process of the
// server's tree has used so far: every process in its process group and
// every descendant of the group leader or of the server (which may have
// moved to a group of their own).
func treeCPU(tree processTree) (map[int]time.Duration, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	all := map[int]procStat{}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := readProcStat(pid)
		if !ok { // gone since the listing
			continue
		}
		all[pid] = st
		children[st.ppid] = append(children[st.ppid], pid)
	}
	in := map[int]bool{}
	var walk func(pid int)
	walk = func(pid int) {
		if _, ok := all[pid]; !ok || in[pid] {
			return
		}
		in[pid] = true
		for _, c := range children[pid] {
			walk(c)
		}
	}
	pgid := tree.Pgid()
	for pid, st := range all {
		if st.pgrp == pgid {
			walk(pid)
		}
	}
	walk(pgid)
	walk(tree.Pid())
	out := make(map[int]time.Duration, len(in))
	for pid := range in {
		out[pid] = all[pid].cpu
	}
	return out, nil
}

// readProcStat reads one process's parent, group and CPU time; false when
// the process is gone or the line does not parse.
func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name (field 2) is in parentheses and may hold anything;
	// the fields after its last ')' start with the state (field 3).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return procStat{}, false
	}
	num := func(k int) int { n, _ := strconv.Atoi(string(f[k])); return n }
	// f[0] state, f[1] ppid, f[2] pgrp, f[11] utime, f[12] stime.
	ticks := num(11) + num(12)
	return procStat{ppid: num(1), pgrp: num(2), cpu: time.Duration(ticks) * time.Second / userHZ}, true
}
