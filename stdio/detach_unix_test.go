//go:build unix

package stdio

import (
	"os/exec"
	"syscall"
)

// detach makes cmd leave its parent's process group: a session of its own.
func detach(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }
