package child

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// On Windows a Job Object does the keeper's work. The server is created
// suspended, in a new process group (so that CTRL_BREAK can reach it and
// its descendants), put into a job that kills everything in it when its
// last handle closes (the bridge holds the only one, so the job dies with
// the bridge, even by TerminateProcess), and only then resumed: nothing it
// starts can escape the job. When the server exits, what is left in the
// job gets stragglerGrace, then the job is terminated.

const stragglerGrace = time.Second

// osProcess is a tool server in a job.
type osProcess struct {
	pid int
	cmd *exec.Cmd // owned by waitLoop (Wait)

	jobMu sync.Mutex
	job   windows.Handle // guarded by jobMu; 0 once closed by waitLoop
}

func (o *osProcess) group() int { return o.pid }

// interrupt sends CTRL_BREAK to the server's process group. It only
// reaches a process that shares the bridge's console; without one it does
// nothing and kill follows after its wait.
func (o *osProcess) interrupt() {
	_ = windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(o.pid))
}

// kill terminates every process in the job.
func (o *osProcess) kill(<-chan struct{}) { o.terminateJob() }

func (o *osProcess) terminateJob() {
	o.jobMu.Lock()
	defer o.jobMu.Unlock()
	if o.job != 0 {
		_ = windows.TerminateJobObject(o.job, 1)
	}
}

// activeProcesses is how many processes the job holds, or -1 if unknown.
func (o *osProcess) activeProcesses() int {
	o.jobMu.Lock()
	defer o.jobMu.Unlock()
	if o.job == 0 {
		return 0
	}
	var info jobAccounting
	if err := windows.QueryInformationJobObject(o.job, windows.JobObjectBasicAccountingInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)), nil); err != nil {
		return -1
	}
	return int(info.ActiveProcesses)
}

// jobAccounting is JOBOBJECT_BASIC_ACCOUNTING_INFORMATION.
type jobAccounting struct {
	TotalUserTime, TotalKernelTime                       int64
	ThisPeriodTotalUserTime, ThisPeriodTotalKernelTime   int64
	TotalPageFaultCount, TotalProcesses, ActiveProcesses uint32
	TotalTerminatedProcesses                             uint32
}

func (p *Process) start(ctx context.Context, spec Spec) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return fmt.Errorf("cannot create a job object: %w", err)
	}
	limits := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{}
	limits.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&limits)), uint32(unsafe.Sizeof(limits))); err != nil {
		windows.CloseHandle(job)
		return fmt.Errorf("cannot set up a job object: %w", err)
	}
	env := spec.Env
	if env == nil {
		env = []string{}
	}
	cmd := &exec.Cmd{
		Path:   spec.Path,
		Args:   spec.Args,
		Env:    env,
		Dir:    spec.Dir,
		Stdin:  spec.Stdin,
		Stdout: spec.Stdout,
		Stderr: spec.Stderr,
		SysProcAttr: &syscall.SysProcAttr{
			CreationFlags: windows.CREATE_SUSPENDED | windows.CREATE_NEW_PROCESS_GROUP,
		},
	}
	if err := cmd.Start(); err != nil {
		windows.CloseHandle(job)
		return startError(spec.Path, err)
	}
	pid := cmd.Process.Pid
	abandon := func(err error) error {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		windows.CloseHandle(job)
		return err
	}
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		return abandon(fmt.Errorf("cannot open the server process: %w", err))
	}
	err = windows.AssignProcessToJobObject(job, h)
	windows.CloseHandle(h)
	if err != nil {
		return abandon(fmt.Errorf("cannot put the server into its job: %w", err))
	}
	if err := resumeProcess(pid); err != nil {
		return abandon(fmt.Errorf("cannot resume the server: %w", err))
	}
	p.os = osProcess{pid: pid, cmd: cmd, job: job}
	p.pid.Store(int64(pid))
	go p.waitLoop()
	return nil
}

// startError describes why path could not be started, in one line.
func startError(path string, err error) error {
	var pe *syscall.Errno
	if errors.As(err, &pe) {
		return fmt.Errorf("%q: %v", path, *pe)
	}
	return fmt.Errorf("%q: %s", path, pathErrText(err))
}

// resumeProcess resumes the threads of a process created suspended (its
// main thread: os/exec does not keep the thread handle).
func resumeProcess(pid int) error {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return err
	}
	defer windows.CloseHandle(snap)
	var te windows.ThreadEntry32
	te.Size = uint32(unsafe.Sizeof(te))
	resumed := 0
	for err = windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if te.OwnerProcessID != uint32(pid) {
			continue
		}
		th, err := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, te.ThreadID)
		if err != nil {
			return err
		}
		_, err = windows.ResumeThread(th)
		windows.CloseHandle(th)
		if err != nil {
			return err
		}
		resumed++
	}
	if resumed == 0 {
		return errors.New("no thread found")
	}
	return nil
}

// waitLoop owns the server process: it waits for it to exit, gives what is
// left in the job stragglerGrace, terminates and closes the job, sets the
// exit and closes done.
func (p *Process) waitLoop() {
	o := &p.os
	_ = o.cmd.Wait()
	for deadline := time.Now().Add(stragglerGrace); o.activeProcesses() > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	o.terminateJob()
	o.jobMu.Lock()
	windows.CloseHandle(o.job)
	o.job = 0
	o.jobMu.Unlock()
	p.exit = Exit{Code: o.cmd.ProcessState.ExitCode()}
	close(p.done)
}
