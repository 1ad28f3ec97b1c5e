//go:build unix

package bridgetest

import (
	"os/exec"
	"syscall"
)

// detach makes cmd leave the server's process group: a session of its own
// (Mode.SpawnDetached).
func detach(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }
