package bridgetest

import (
	"errors"
	"os/exec"
	"syscall"

	"golang.org/x/sys/windows"
)

// detach makes cmd leave the server's process group and console
// (Mode.SpawnDetached); it stays in any Job Object the server is in.
// groupOnly changes nothing: Windows has no sessions to leave.
func detach(cmd *exec.Cmd, groupOnly bool) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP | windows.DETACHED_PROCESS}
}

// killParent is refused on Windows (Mode.KillParent): the Job Object holds
// the server's descendants whatever happens to its parent.
func killParent() error { return errors.New("killParent is for Unix only") }
