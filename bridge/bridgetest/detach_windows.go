package bridgetest

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/windows"
)

// detach makes cmd leave the server's process group and console
// (Mode.SpawnDetached); it stays in any Job Object the server is in.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP | windows.DETACHED_PROCESS}
}
