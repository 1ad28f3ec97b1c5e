//go:build unix

package child

import (
	"os"
	"os/exec"

	"golang.org/x/sys/unix"
)

// InGroup prepares cmd, not yet started, to run as a short-lived child: the
// leader of a process group of its own (on Linux also killed if the
// bridge's thread that started it dies). For a cmd made by
// exec.CommandContext, the whole group is killed when the context ends.
// Python probes, doctor's probes and test servers run this way; tool
// servers run with Start.
func InGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = groupSysProcAttr()
	if cmd.Cancel != nil { // made by CommandContext
		cmd.Cancel = func() error { return KillGroup(cmd.Process) }
	}
}

// Interrupt asks the group led by p to stop: SIGTERM to the group.
func Interrupt(p *os.Process) error { return unix.Kill(-p.Pid, unix.SIGTERM) }

// KillGroup kills the group led by p: SIGKILL to the group.
func KillGroup(p *os.Process) error { return unix.Kill(-p.Pid, unix.SIGKILL) }

// Alive reports whether process pid exists (a zombie counts, as does a
// process this user may not signal).
func Alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || err == unix.EPERM
}
