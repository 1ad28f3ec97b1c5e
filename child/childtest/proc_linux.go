package childtest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// processesOfRun lists the live processes, other than this one, whose
// environment carries this run's marker or whose executable is this test
// binary.
func processesOfRun(run, exe string) []int {
	entries, _ := os.ReadDir("/proc")
	me := os.Getpid()
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == me {
			continue
		}
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		path, _ := os.Readlink("/proc/" + e.Name() + "/exe")
		if bytes.Contains(env, []byte(RunEnv+"="+run+"\x00")) || (exe != "" && path == exe) {
			found = append(found, pid)
		}
	}
	return found
}

func commandLine(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}
