//go:build unix

package child

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// keeperKillGrace is how long kill waits for the keeper to SIGKILL and
	// reap the group itself before it SIGKILLs the group.
	keeperKillGrace = 2 * time.Second
	// linkDrainBound is how long the lifeline may stay open after the keeper
	// exited (a descriptor that leaked elsewhere) before it is closed.
	linkDrainBound = time.Second
)

// osProcess is a tool server under a keeper, which leads its process group.
type osProcess struct {
	pgid int       // the keeper's pid, which is the process group id
	cmd  *exec.Cmd // the keeper; owned by waitLoop (Wait)
	link *os.File  // the lifeline: read by linkLoop; written by start's command writer and kill; closed by waitLoop

	started     chan error    // buffered 1; the keeper's start report, sent once by linkLoop
	linkDone    chan struct{} // closed by linkLoop
	childReport string        // the keeper's "exit N" / "signal N" line; written by linkLoop before linkDone

	reapMu sync.Mutex // no signal is sent to -pgid once the keeper is reaped
	reaped bool       // guarded by reapMu

	// cg is the server's own cgroup (Linux, where the system delegates
	// one), or nil; removed by waitLoop.
	cg *cgroup

	wg sync.WaitGroup // linkLoop and the command writer; waited for by waitLoop
}

func (o *osProcess) group() int { return o.pgid }

func (o *osProcess) interrupt() { o.signalGroup(unix.SIGTERM) }

// kill asks the keeper to SIGKILL and reap the group itself, so that no
// zombie is left to an init that may not reap; then SIGKILLs the group.
func (o *osProcess) kill(done <-chan struct{}) {
	_, _ = o.link.Write([]byte("kill\n"))
	tm := time.NewTimer(keeperKillGrace)
	defer tm.Stop()
	select {
	case <-done:
	case <-tm.C:
		o.signalGroup(unix.SIGKILL)
		if o.cg != nil {
			o.cg.kill()
		}
	}
}

// signalGroup sends sig to the process group unless the keeper (whose pid is
// the group id) has been reaped, when the id could be reused.
func (o *osProcess) signalGroup(sig unix.Signal) {
	o.reapMu.Lock()
	defer o.reapMu.Unlock()
	if !o.reaped {
		_ = unix.Kill(-o.pgid, sig)
	}
}

func (p *Process) start(ctx context.Context, spec Spec) error {
	keeper := spec.KeeperPath
	if keeper == "" {
		var err error
		if keeper, err = os.Executable(); err != nil {
			return fmt.Errorf("cannot find the bridge's own executable to run the keeper: %w", err)
		}
	}
	line, err := json.Marshal(keeperSpec{Path: spec.Path, Argv: spec.Args, Env: spec.Env, Dir: spec.Dir})
	if err != nil {
		return err
	}
	line = append(line, '\n')

	link, keeperLink, err := lifeline()
	if err != nil {
		return fmt.Errorf("lifeline: %w", err)
	}
	// The keeper's environment: the marker and settings of the Go runtime
	// only (so that a race-enabled or coverage build behaves as configured);
	// the server's environment travels on the lifeline.
	env := []string{keeperEnv + "=1"}
	for _, k := range []string{"GORACE", "GOCOVERDIR", "GOTRACEBACK"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	cmd := &exec.Cmd{
		Path:        keeper,
		Args:        []string{keeper, keeperArg, spec.Name},
		Env:         env,
		Dir:         "/",
		Stdin:       spec.Stdin,
		Stdout:      spec.Stdout,
		Stderr:      spec.Stderr,
		ExtraFiles:  []*os.File{keeperLink},
		SysProcAttr: keeperSysProcAttr(),
	}
	cg := newCgroup()
	if cg != nil {
		cg.apply(cmd.SysProcAttr)
	}
	err = cmd.Start()
	if err != nil && cg != nil {
		// The system made the cgroup but will not start a process in it
		// (clone3 refused): without one, as where there is none.
		cg.remove(0)
		cg = nil
		cmd = &exec.Cmd{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir, Stdin: cmd.Stdin,
			Stdout: cmd.Stdout, Stderr: cmd.Stderr, ExtraFiles: cmd.ExtraFiles, SysProcAttr: keeperSysProcAttr()}
		err = cmd.Start()
	}
	if cg != nil {
		cg.started()
	}
	_ = keeperLink.Close()
	if err != nil {
		_ = link.Close()
		return fmt.Errorf("cannot run the keeper %q: %s", keeper, pathErrText(err))
	}
	o := &p.os
	o.pgid, o.cmd, o.link, o.cg = cmd.Process.Pid, cmd, link, cg
	o.started = make(chan error, 1)
	o.linkDone = make(chan struct{})
	o.wg.Add(2)
	go o.linkLoop(p)
	// The command goes to the keeper from its own goroutine, so that a
	// keeper that does not read cannot block start past ctx.
	go func() {
		defer o.wg.Done()
		_, _ = link.Write(line)
	}()
	go p.waitLoop()

	fail := func(err error) error {
		o.kill(p.done)
		<-p.done
		return err
	}
	select {
	case err := <-o.started:
		if err != nil {
			return fail(err)
		}
		return nil
	case <-p.done:
		select {
		case err := <-o.started: // reported just before the keeper exited
			if err != nil {
				return err
			}
			return nil
		default:
		}
		return fmt.Errorf("the keeper %q exited before starting the server (%s %s)", keeper, p.name, p.exit)
	case <-ctx.Done():
		return fail(fmt.Errorf("starting %s: %w", p.name, ctx.Err()))
	}
}

// lifeline is a connected pair of Unix sockets, close-on-exec (set under
// ForkLock where the system cannot do it atomically) and, on the bridge's
// side, non-blocking so that deadlines and Close unblock it.
func lifeline() (ours, theirs *os.File, err error) {
	syscall.ForkLock.RLock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fds[0])
		unix.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, err
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "lifeline"), os.NewFile(uintptr(fds[1]), "lifeline-keeper"), nil
}

// waitLoop owns the keeper process: it waits for it to exit, SIGKILLs
// whatever is left in its group while the keeper is a zombie (so the group
// id cannot be reused), reaps it, reads the keeper's last report, sets the
// exit and closes done.
func (p *Process) waitLoop() {
	o := &p.os
	waitNoReap(o.pgid)
	o.reapMu.Lock()
	_ = unix.Kill(-o.pgid, unix.SIGKILL)
	_ = o.cmd.Wait()
	o.reaped = true
	o.reapMu.Unlock()
	if o.cg != nil {
		// Whatever is left of the server, in any group or session (its
		// keeper gone, killed by the server or at its end), ends here.
		o.cg.remove(o.pgid)
	}

	// The keeper's end of the lifeline closed with it; the deadline only
	// guards against a descriptor that leaked elsewhere.
	_ = o.link.SetDeadline(time.Now().Add(linkDrainBound))
	<-o.linkDone
	_ = o.link.Close()
	o.wg.Wait()
	p.exit = o.exit()
	close(p.done)
}

// exit is how the server ended, from the keeper's report, or from the
// keeper's own status when it could not report.
func (o *osProcess) exit() Exit {
	kind, num, _ := strings.Cut(o.childReport, " ")
	n, err := strconv.Atoi(num)
	switch {
	case err == nil && kind == "exit":
		return Exit{Code: n}
	case err == nil && kind == "signal":
		return Exit{Code: -1, Signal: signalName(unix.Signal(n))}
	}
	ws, _ := o.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return Exit{Code: -1, Signal: signalName(ws.Signal())}
	}
	return Exit{Code: ws.ExitStatus()}
}

// linkLoop reads the keeper's reports from the lifeline.
func (o *osProcess) linkLoop(p *Process) {
	defer o.wg.Done()
	defer close(o.linkDone)
	br := bufio.NewReaderSize(o.link, 4096)
	sentStart := false
	for {
		line, err := br.ReadString('\n')
		line = strings.TrimSpace(line)
		kind, rest, _ := strings.Cut(line, " ")
		switch {
		case line == "":
		case !sentStart && kind == "started":
			if pid, err := strconv.Atoi(rest); err == nil {
				p.pid.Store(int64(pid))
			}
			sentStart = true
			o.started <- nil
		case !sentStart && kind == "error":
			sentStart = true
			o.started <- errors.New(rest)
		case kind == "exit" || kind == "signal":
			o.childReport = line
		}
		if err != nil {
			return
		}
	}
}

// signalName is "SIGKILL" for SIGKILL.
func signalName(s unix.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}
