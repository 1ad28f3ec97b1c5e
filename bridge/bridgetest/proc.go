package bridgetest

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// ProcStat reads the state ("R", "S", "Z", ...) and the parent pid of pid
// from /proc/<pid>/stat; ok is false when the process is gone. The command
// name before them may hold spaces and parentheses, so the fields are read
// after its last ')'.
func ProcStat(pid int) (state string, ppid int, ok bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0], ppid, err == nil
}
