//go:build !linux

package childtest

// processesOfRun finds nothing: only Linux lets a process read another's
// environment, which marks a process of this run. The tests of the child
// and stdio packages check the processes they start themselves.
func processesOfRun(run, exe string) []int { return nil }

func commandLine(pid int) string { return "" }
