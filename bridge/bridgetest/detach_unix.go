//go:build unix

package bridgetest

import (
	"os"
	"os/exec"
	"syscall"
)

// detach makes cmd leave the server's process group: a session of its own
// (Mode.SpawnDetached).
func detach(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }

// killParent SIGKILLs this process's parent (Mode.KillParent).
func killParent() error { return syscall.Kill(os.Getppid(), syscall.SIGKILL) }
