package child

import (
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/windows"
)

// InGroup prepares cmd, not yet started, to run as a short-lived child: in
// a new process group. For a cmd made by exec.CommandContext, its whole
// process tree is killed when the context ends. Python probes, doctor's
// probes and test servers run this way; tool servers run with Start.
func InGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP}
	if cmd.Cancel != nil { // made by CommandContext
		cmd.Cancel = func() error { return KillGroup(cmd.Process) }
	}
}

// Interrupt sends CTRL_BREAK to the process group led by p (it reaches only
// processes that share the bridge's console).
func Interrupt(p *os.Process) error {
	return windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(p.Pid))
}

// KillGroup terminates p and every process descended from it.
func KillGroup(p *os.Process) error {
	for _, d := range Tree(p.Pid) { // p and its descendants (Group is the pid on Windows)
		if d.PID == p.Pid {
			continue
		}
		if h, err := windows.OpenProcess(windows.PROCESS_TERMINATE, false, uint32(d.PID)); err == nil {
			_ = windows.TerminateProcess(h, 1)
			windows.CloseHandle(h)
		}
	}
	return p.Kill()
}

// Alive reports whether process pid is running.
func Alive(pid int) bool {
	h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return err == windows.ERROR_ACCESS_DENIED
	}
	defer windows.CloseHandle(h)
	ev, err := windows.WaitForSingleObject(h, 0)
	return err == nil && ev == uint32(windows.WAIT_TIMEOUT)
}
