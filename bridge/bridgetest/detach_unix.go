//go:build unix

package bridgetest

import (
	"os"
	"os/exec"
	"syscall"
)

// detach makes cmd leave the server's process group: a session of its own
// (Mode.SpawnDetached), or with groupOnly a group of its own in the same
// session (Mode.DetachGroupOnly).
func detach(cmd *exec.Cmd, groupOnly bool) {
	if groupOnly {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}

// killParent SIGKILLs this process's parent (Mode.KillParent).
func killParent() error { return syscall.Kill(os.Getppid(), syscall.SIGKILL) }
